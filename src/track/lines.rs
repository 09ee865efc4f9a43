//! Counting lines: named segments of a camera's frame, which side of one a point is on, and
//! whether a move crossed it.
//!
//! Owns: line validation, sides and the crossing direction convention. Must not: know about tracks,
//! debouncing or events (the watcher decides when a side change counts).
//!
//! Coordinates are frame fractions, as for zones. Direction: walk along the line from its first
//! point to its second, on the image as displayed; a crossing from your left to your right is `in`,
//! from right to left `out`. So a line drawn left to right (`[[0, 0.5], [1, 0.5]]`) counts objects
//! moving down the image as `in`; drawn bottom to top (`[[0.5, 1], [0.5, 0]]`), objects moving to the
//! right. A point exactly on the line is on neither side.

use super::geometry::{check_in_frame, orientation, segments_intersect, OutsideFrame, Point};

/// Most lines per camera (a track's line sides are 64-bit sets).
pub const MAX_LINES: usize = 64;

/// Why two points cannot be a line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineError {
    #[error(transparent)]
    OutsideFrame(#[from] OutsideFrame),
    #[error("both points are [{x}, {y}]: a line needs two different points")]
    SameEndpoints { x: f64, y: f64 },
}

/// Side of a directed line, as seen walking from its first point to its second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Left,
    Right,
}

/// Direction of a crossing (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the left side to the right side.
    In,
    /// From the right side to the left side.
    Out,
}

impl Direction {
    /// The direction of a move that ends on `side`.
    pub fn towards(side: Side) -> Direction {
        match side {
            Side::Right => Direction::In,
            Side::Left => Direction::Out,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// A directed segment in frame fractions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    from: Point,
    to: Point,
}

impl Segment {
    pub fn new(points: [Point; 2]) -> Result<Segment, LineError> {
        check_in_frame(&points)?;
        if points[0] == points[1] {
            return Err(LineError::SameEndpoints { x: points[0][0], y: points[0][1] });
        }
        Ok(Segment { from: points[0], to: points[1] })
    }

    /// The side of the (infinite) line `p` is on; `None` exactly on it.
    pub fn side(&self, p: Point) -> Option<Side> {
        let o = orientation(self.from, self.to, p);
        if o > 0.0 {
            Some(Side::Right)
        } else if o < 0.0 {
            Some(Side::Left)
        } else {
            None
        }
    }

    /// The move from `a` to `b` passes through the segment itself (its endpoints included), not
    /// only through the infinite line beyond them.
    pub fn crossed_by(&self, a: Point, b: Point) -> bool {
        segments_intersect(a, b, self.from, self.to)
    }

    pub fn points(&self) -> [Point; 2] {
        [self.from, self.to]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_and_directions_follow_the_documented_convention() {
        let horizontal = Segment::new([[0.0, 0.5], [1.0, 0.5]]).expect("valid");
        assert_eq!(horizontal.side([0.5, 0.9]), Some(Side::Right), "below a left-to-right line");
        assert_eq!(horizontal.side([0.5, 0.1]), Some(Side::Left));
        assert_eq!(Direction::towards(Side::Right), Direction::In, "moving down across it is `in`");
        let upwards = Segment::new([[0.5, 1.0], [0.5, 0.0]]).expect("valid");
        assert_eq!(upwards.side([0.9, 0.5]), Some(Side::Right), "right of a bottom-to-top line");
        assert_eq!(Direction::towards(upwards.side([0.9, 0.5]).expect("side")).name(), "in");
    }

    #[test]
    fn points_exactly_on_the_line_have_no_side() {
        let diagonal = Segment::new([[0.0, 0.0], [1.0, 1.0]]).expect("valid");
        assert_eq!(diagonal.side([0.5, 0.5]), None);
        assert_eq!(diagonal.side([2.0, 2.0]), None, "the infinite line, beyond the segment");
        assert_eq!(diagonal.side([0.0, 0.0]), None, "an endpoint");
    }

    #[test]
    fn crossings_through_the_segment_and_its_endpoints_count_not_beside_it() {
        let gate = Segment::new([[0.25, 0.5], [0.75, 0.5]]).expect("valid");
        assert!(gate.crossed_by([0.5, 0.4], [0.5, 0.6]), "through the middle");
        assert!(gate.crossed_by([0.25, 0.4], [0.25, 0.6]), "through an endpoint");
        assert!(gate.crossed_by([0.5, 0.4], [0.5, 0.5]), "ending exactly on it");
        assert!(!gate.crossed_by([0.9, 0.4], [0.9, 0.6]), "past the end of the segment");
        assert!(!gate.crossed_by([0.5, 0.1], [0.5, 0.4]), "stops short");
    }

    #[test]
    fn invalid_lines_say_why() {
        assert_eq!(Segment::new([[0.5, 0.5], [0.5, 0.5]]), Err(LineError::SameEndpoints { x: 0.5, y: 0.5 }));
        assert_eq!(
            Segment::new([[0.0, 0.0], [1.0, -0.1]]),
            Err(LineError::OutsideFrame(OutsideFrame { index: 1, x: 1.0, y: -0.1 }))
        );
        assert!(matches!(Segment::new([[f64::NAN, 0.0], [1.0, 1.0]]), Err(LineError::OutsideFrame(_))));
    }
}
