//! Zones: named polygons of a camera's frame, and whether a point is inside one.
//!
//! Owns: polygon validation (the reasons a configured zone is refused) and the point-in-polygon
//! test. Must not: know about tracks, labels' names, configs or events.
//!
//! Coordinates are fractions of the frame (x from the left, y from the top, 0.0..=1.0), not
//! pixels: a zone stays where it was drawn when a camera's resolution changes (another V4L2 mode,
//! an RTSP stream renegotiated, a second camera of another model), and one config works for all.
//! A point exactly on the boundary (an edge or a vertex) is inside.

use super::geometry::{check_in_frame, on_segment, orientation, segments_intersect, OutsideFrame, Point};

/// Most points a zone polygon may have (each tracked object tests each edge once per frame).
pub const MAX_POLYGON_POINTS: usize = 64;
/// Most zones per camera (a track's zone membership is a 64-bit set).
pub const MAX_ZONES: usize = 64;

/// Why a polygon cannot be a zone.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolygonError {
    #[error("a zone polygon needs at least 3 points, this one has {0}")]
    TooFewPoints(usize),
    #[error("a zone polygon may have at most {MAX_POLYGON_POINTS} points, this one has {0}")]
    TooManyPoints(usize),
    #[error(transparent)]
    OutsideFrame(#[from] OutsideFrame),
    #[error("points {first} and {second} are the same point")]
    RepeatedPoint { first: usize, second: usize },
    #[error("the polygon has no area (its points lie on one line)")]
    Degenerate,
    #[error("edges {first} and {second} cross or touch: the polygon intersects itself")]
    SelfIntersecting { first: String, second: String },
}

/// A simple polygon (no self-intersections) with a positive area, in frame fractions.
#[derive(Debug, Clone, PartialEq)]
pub struct Polygon {
    points: Vec<Point>,
    /// min x, min y, max x, max y: most points are rejected without looking at an edge.
    bounds: [f64; 4],
}

impl Polygon {
    /// Validates `points` (the polygon closes itself; repeating the first point at the end is allowed).
    pub fn new(points: &[Point]) -> Result<Polygon, PolygonError> {
        let mut points = points.to_vec();
        if points.len() > 3 && points.first() == points.last() {
            points.pop();
        }
        if points.len() < 3 {
            return Err(PolygonError::TooFewPoints(points.len()));
        }
        if points.len() > MAX_POLYGON_POINTS {
            return Err(PolygonError::TooManyPoints(points.len()));
        }
        check_in_frame(&points)?;
        for first in 0..points.len() {
            if let Some(second) = (first + 1..points.len()).find(|&second| points[second] == points[first]) {
                return Err(PolygonError::RepeatedPoint { first, second });
            }
        }
        if points[2..].iter().all(|&p| orientation(points[0], points[1], p) == 0.0) {
            return Err(PolygonError::Degenerate);
        }
        check_simple(&points)?;
        // A simple polygon whose points are not all on one line has an area; this catches slivers
        // too thin for f64 to tell apart from a line.
        let doubled_area: f64 =
            (0..points.len()).map(|i| orientation([0.0, 0.0], points[i], points[(i + 1) % points.len()])).sum();
        if doubled_area.abs() < 1e-12 {
            return Err(PolygonError::Degenerate);
        }
        let bounds = points.iter().fold([f64::MAX, f64::MAX, f64::MIN, f64::MIN], |b, p| {
            [b[0].min(p[0]), b[1].min(p[1]), b[2].max(p[0]), b[3].max(p[1])]
        });
        Ok(Polygon { points, bounds })
    }

    /// `p` is inside or on the boundary.
    pub fn contains(&self, p: Point) -> bool {
        let [min_x, min_y, max_x, max_y] = self.bounds;
        if !(min_x <= p[0] && p[0] <= max_x && min_y <= p[1] && p[1] <= max_y) {
            return false;
        }
        let n = self.points.len();
        let mut inside = false;
        for i in 0..n {
            let (a, b) = (self.points[i], self.points[(i + 1) % n]);
            if on_segment(a, b, p) {
                return true;
            }
            // Even-odd rule with a ray to the right; each edge is half-open in y, so a ray through
            // a vertex counts once.
            if (a[1] > p[1]) != (b[1] > p[1]) {
                let x_at = a[0] + (p[1] - a[1]) * (b[0] - a[0]) / (b[1] - a[1]);
                if p[0] < x_at {
                    inside = !inside;
                }
            }
        }
        inside
    }

    pub fn points(&self) -> &[Point] {
        &self.points
    }
}

/// No two edges meet except neighbours at their shared vertex.
fn check_simple(points: &[Point]) -> Result<(), PolygonError> {
    let n = points.len();
    let edge = |i: usize| (points[i], points[(i + 1) % n]);
    let name = |i: usize| format!("{i}-{}", (i + 1) % n);
    for i in 0..n {
        for j in i + 1..n {
            let (a, b) = edge(i);
            let (c, d) = edge(j);
            let neighbours = j == i + 1 || (i == 0 && j == n - 1);
            let meet = if neighbours {
                // Neighbours share one vertex; they must not also run back along each other.
                let (shared, far_i, far_j) = if j == i + 1 { (b, a, d) } else { (a, b, c) };
                orientation(far_i, shared, far_j) == 0.0 && {
                    let (u, v) =
                        ([far_i[0] - shared[0], far_i[1] - shared[1]], [far_j[0] - shared[0], far_j[1] - shared[1]]);
                    u[0] * v[0] + u[1] * v[1] > 0.0
                }
            } else {
                segments_intersect(a, b, c, d)
            };
            if meet {
                return Err(PolygonError::SelfIntersecting { first: name(i), second: name(j) });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn square() -> Polygon {
        Polygon::new(&[[0.25, 0.25], [0.75, 0.25], [0.75, 0.75], [0.25, 0.75]]).expect("valid")
    }

    #[test]
    fn inside_outside_and_exactly_on_the_boundary() {
        let zone = square();
        assert!(zone.contains([0.5, 0.5]));
        assert!(!zone.contains([0.1, 0.5]));
        assert!(!zone.contains([0.5, 0.8]));
        // On an edge, on each vertex: inside.
        for p in [[0.5, 0.25], [0.75, 0.5], [0.5, 0.75], [0.25, 0.5]] {
            assert!(zone.contains(p), "edge point {p:?}");
        }
        for p in [[0.25, 0.25], [0.75, 0.25], [0.75, 0.75], [0.25, 0.75]] {
            assert!(zone.contains(p), "vertex {p:?}");
        }
        // Level with a vertex but outside: the ray through the vertex must not count twice.
        assert!(!zone.contains([0.8, 0.25]));
        assert!(!zone.contains([0.1, 0.75]));
    }

    #[test]
    fn concave_polygons() {
        // A "U": the notch between the arms is outside.
        let u = Polygon::new(&[
            [0.0, 0.0],
            [0.25, 0.0],
            [0.25, 0.5],
            [0.75, 0.5],
            [0.75, 0.0],
            [1.0, 0.0],
            [1.0, 1.0],
            [0.0, 1.0],
        ])
        .expect("valid");
        assert!(u.contains([0.1, 0.1]) && u.contains([0.9, 0.1]) && u.contains([0.5, 0.9]));
        assert!(!u.contains([0.5, 0.25]), "the notch");
        assert!(u.contains([0.5, 0.5]), "the notch's bottom edge");
        // A ray from a point inside the notch passes the right arm's vertices level with them.
        assert!(!u.contains([0.5, 0.0]));
    }

    #[test]
    fn the_closing_point_may_be_repeated() {
        let closed = Polygon::new(&[[0.25, 0.25], [0.75, 0.25], [0.75, 0.75], [0.25, 0.75], [0.25, 0.25]])
            .expect("an explicitly closed polygon is fine");
        assert_eq!(closed, square());
    }

    #[test]
    fn invalid_polygons_say_why() {
        assert_eq!(Polygon::new(&[[0.0, 0.0], [1.0, 0.0]]), Err(PolygonError::TooFewPoints(2)));
        assert_eq!(
            Polygon::new(&[[0.0, 0.0], [1.5, 0.0], [1.0, 1.0]]),
            Err(PolygonError::OutsideFrame(OutsideFrame { index: 1, x: 1.5, y: 0.0 }))
        );
        assert!(matches!(Polygon::new(&[[0.0, 0.0], [f64::NAN, 0.0], [1.0, 1.0]]), Err(PolygonError::OutsideFrame(_))));
        assert_eq!(Polygon::new(&[[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]]), Err(PolygonError::Degenerate));
        assert_eq!(
            Polygon::new(&[[0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]),
            Err(PolygonError::RepeatedPoint { first: 0, second: 2 })
        );
        // A bow tie: edges 0-1 and 2-3 cross.
        assert_eq!(
            Polygon::new(&[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]),
            Err(PolygonError::SelfIntersecting { first: "0-1".into(), second: "2-3".into() })
        );
        // A spike that runs back along its own edge.
        assert!(matches!(
            Polygon::new(&[[0.0, 0.0], [1.0, 0.0], [0.5, 0.0], [0.5, 1.0]]),
            Err(PolygonError::SelfIntersecting { .. })
        ));
        // A vertex touching another edge.
        assert!(matches!(
            Polygon::new(&[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.5, 0.0], [0.0, 1.0]]),
            Err(PolygonError::SelfIntersecting { .. })
        ));
        let many: Vec<Point> = (0..=MAX_POLYGON_POINTS)
            .map(|i| {
                let angle = i as f64 / (MAX_POLYGON_POINTS + 1) as f64 * std::f64::consts::TAU;
                [0.5 + 0.4 * angle.cos(), 0.5 + 0.4 * angle.sin()]
            })
            .collect();
        assert_eq!(Polygon::new(&many), Err(PolygonError::TooManyPoints(MAX_POLYGON_POINTS + 1)));
        assert!(Polygon::new(&many[..MAX_POLYGON_POINTS]).is_ok(), "a circle-like polygon at the limit is fine");
    }
}
