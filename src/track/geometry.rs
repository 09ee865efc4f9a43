//! Planar primitives shared by zones and lines: orientation, closed-segment intersection, and the
//! check that points lie in the frame.
//!
//! Owns: exact-as-f64-allows predicates on points in frame fractions. Must not: know what a zone,
//! a line or a track is. Closed means endpoints count: a segment touching another at an endpoint
//! intersects it, and a point on a segment's end lies on it.

/// A point in frame fractions: x from the left edge, y from the top edge, 0.0..=1.0 inside the frame.
pub type Point = [f64; 2];

/// A point outside the frame (or not a number): its place in its list and its coordinates.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "point {index} [{x}, {y}] is outside the frame: coordinates are fractions of the frame's width and height, \
     0.0..=1.0"
)]
pub struct OutsideFrame {
    pub index: usize,
    pub x: f64,
    pub y: f64,
}

/// The first of `points` that is not in the frame (0.0..=1.0 on both axes), if any.
pub fn check_in_frame(points: &[Point]) -> Result<(), OutsideFrame> {
    match points.iter().position(|&[x, y]| !((0.0..=1.0).contains(&x) && (0.0..=1.0).contains(&y))) {
        Some(index) => Err(OutsideFrame { index, x: points[index][0], y: points[index][1] }),
        None => Ok(()),
    }
}

/// Twice the signed area of the triangle a, b, c: positive when c lies to the right of a→b as the
/// image is displayed (y grows downwards), negative to the left, 0 when the three are collinear.
pub fn orientation(a: Point, b: Point, c: Point) -> f64 {
    (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
}

/// `p` lies on the closed segment a–b.
pub fn on_segment(a: Point, b: Point, p: Point) -> bool {
    orientation(a, b, p) == 0.0 && within_bounds(a, b, p)
}

/// `p` lies in the axis-aligned bounding box of a and b (for a point known to be collinear with them).
fn within_bounds(a: Point, b: Point, p: Point) -> bool {
    a[0].min(b[0]) <= p[0] && p[0] <= a[0].max(b[0]) && a[1].min(b[1]) <= p[1] && p[1] <= a[1].max(b[1])
}

/// The closed segments a–b and c–d have at least one point in common.
pub fn segments_intersect(a: Point, b: Point, c: Point, d: Point) -> bool {
    let (d1, d2) = (orientation(c, d, a), orientation(c, d, b));
    let (d3, d4) = (orientation(a, b, c), orientation(a, b, d));
    if ((d1 > 0.0 && d2 < 0.0) || (d1 < 0.0 && d2 > 0.0)) && ((d3 > 0.0 && d4 < 0.0) || (d3 < 0.0 && d4 > 0.0)) {
        return true;
    }
    (d1 == 0.0 && within_bounds(c, d, a))
        || (d2 == 0.0 && within_bounds(c, d, b))
        || (d3 == 0.0 && within_bounds(a, b, c))
        || (d4 == 0.0 && within_bounds(a, b, d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orientation_follows_the_displayed_image() {
        // A line drawn left to right: below it (greater y) is its right side.
        assert!(orientation([0.0, 0.5], [1.0, 0.5], [0.5, 0.9]) > 0.0);
        assert!(orientation([0.0, 0.5], [1.0, 0.5], [0.5, 0.1]) < 0.0);
        assert_eq!(orientation([0.0, 0.5], [1.0, 0.5], [0.25, 0.5]), 0.0);
    }

    #[test]
    fn crossing_touching_and_disjoint_segments() {
        assert!(segments_intersect([0.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.0, 0.0]), "an X");
        assert!(segments_intersect([0.0, 0.0], [0.5, 0.5], [0.5, 0.5], [1.0, 0.0]), "sharing an endpoint");
        assert!(segments_intersect([0.0, 0.5], [1.0, 0.5], [0.5, 0.5], [0.5, 1.0]), "an endpoint on the other");
        assert!(segments_intersect([0.0, 0.0], [0.5, 0.0], [0.25, 0.0], [1.0, 0.0]), "collinear overlap");
        assert!(!segments_intersect([0.0, 0.0], [0.25, 0.0], [0.5, 0.0], [1.0, 0.0]), "collinear apart");
        assert!(!segments_intersect([0.0, 0.0], [1.0, 0.0], [0.0, 0.25], [1.0, 0.5]), "parallel-ish apart");
        assert!(!segments_intersect([0.0, 0.0], [0.4, 0.4], [0.0, 1.0], [1.0, 0.0]), "stops short");
    }

    #[test]
    fn points_on_segments_include_the_endpoints() {
        assert!(on_segment([0.0, 0.0], [1.0, 1.0], [0.5, 0.5]));
        assert!(on_segment([0.0, 0.0], [1.0, 1.0], [1.0, 1.0]));
        assert!(!on_segment([0.0, 0.0], [1.0, 1.0], [1.5, 1.5]), "collinear, beyond the end");
        assert!(!on_segment([0.0, 0.0], [1.0, 1.0], [0.5, 0.25]));
    }
}
