//! Constant-velocity Kalman filter on a box, in continuous time.
//!
//! Owns: the motion model of one track — box centre, width and height, each with its velocity in
//! pixels per second — and its prediction over an arbitrary time step and correction by an observed
//! box. Must not: know about detections, scores, labels or track lifecycles.
//!
//! The state is (cx, cy, w, h) and their velocities. Process and measurement noise are diagonal
//! (independent per coordinate, as in DeepSORT and ByteTrack), so the 8×8 filter separates exactly
//! into four independent two-state filters (position, velocity): the same estimates at a fraction of
//! the cost, with no matrix inversion. Time steps are seconds, not frames, so a track behaves the
//! same at 5 and at 30 frames per second. Noise scales with the box size (x and w with the width,
//! y and h with the height), so a near, large object may move more pixels than a far, small one.

use crate::detection::BoundingBox;

/// Standard deviation of a box measurement, as a fraction of the box size (DeepSORT's 1/20).
const MEASUREMENT_STD: f32 = 0.05;
/// Standard deviation of the acceleration (white-noise model), in box sizes per second squared.
const ACCELERATION_STD: f32 = 1.0;
/// Initial standard deviation of the position, as a fraction of the box size.
const INITIAL_POSITION_STD: f32 = 0.1;
/// Initial standard deviation of the velocity, in box sizes per second: nothing is known yet.
const INITIAL_VELOCITY_STD: f32 = 2.0;
/// Widths and heights never go below one pixel, whatever the velocity of a lost track says.
const MIN_SIZE: f32 = 1.0;

/// One coordinate and its velocity, with their 2×2 covariance.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Axis {
    position: f32,
    velocity: f32,
    /// Covariance: position variance, position-velocity covariance, velocity variance.
    pp: f32,
    pv: f32,
    vv: f32,
}

impl Axis {
    fn new(position: f32, size: f32) -> Axis {
        Axis {
            position,
            velocity: 0.0,
            pp: (INITIAL_POSITION_STD * size).powi(2),
            pv: 0.0,
            vv: (INITIAL_VELOCITY_STD * size).powi(2),
        }
    }

    /// Moves the estimate `dt` seconds ahead; `q` is the acceleration variance.
    fn predict(&mut self, dt: f32, q: f32) {
        self.position += self.velocity * dt;
        let dt2 = dt * dt;
        self.pp += 2.0 * dt * self.pv + dt2 * self.vv + q * dt2 * dt / 3.0;
        self.pv += dt * self.vv + q * dt2 / 2.0;
        self.vv += q * dt;
    }

    /// Corrects the estimate with a measurement of the position whose variance is `r`.
    fn update(&mut self, measured: f32, r: f32) {
        let innovation = measured - self.position;
        let s = self.pp + r;
        let (k_position, k_velocity) = (self.pp / s, self.pv / s);
        self.position += k_position * innovation;
        self.velocity += k_velocity * innovation;
        self.vv -= k_velocity * self.pv;
        self.pv *= 1.0 - k_position;
        self.pp *= 1.0 - k_position;
    }
}

/// The motion state of one tracked box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxFilter {
    /// Centre x, centre y, width, height.
    axes: [Axis; 4],
}

impl BoxFilter {
    /// A filter that starts at `observed`, at rest, with a wide velocity uncertainty.
    pub fn new(observed: &BoundingBox) -> BoxFilter {
        let [cx, cy, w, h] = measurement(observed);
        BoxFilter { axes: [Axis::new(cx, w), Axis::new(cy, h), Axis::new(w, w), Axis::new(h, h)] }
    }

    /// Advances the estimate by `dt` seconds (negative steps count as zero).
    pub fn predict(&mut self, dt: f32) {
        let dt = if dt.is_finite() { dt.max(0.0) } else { 0.0 };
        if dt == 0.0 {
            return;
        }
        let (w, h) = self.size();
        for (axis, size) in self.axes.iter_mut().zip([w, h, w, h]) {
            axis.predict(dt, (ACCELERATION_STD * size).powi(2));
        }
    }

    /// Corrects the estimate with an observed box.
    pub fn update(&mut self, observed: &BoundingBox) {
        let z = measurement(observed);
        let (w, h) = (z[2], z[3]);
        for ((axis, measured), size) in self.axes.iter_mut().zip(z).zip([w, h, w, h]) {
            axis.update(measured, (MEASUREMENT_STD * size).powi(2));
        }
    }

    /// The estimated box.
    pub fn bbox(&self) -> BoundingBox {
        let [cx, cy, _, _] = self.axes.map(|a| a.position);
        let (w, h) = self.size();
        BoundingBox { x1: cx - w / 2.0, y1: cy - h / 2.0, x2: cx + w / 2.0, y2: cy + h / 2.0 }
    }

    /// Estimated velocity of the box centre, pixels per second.
    pub fn velocity(&self) -> (f32, f32) {
        (self.axes[0].velocity, self.axes[1].velocity)
    }

    fn size(&self) -> (f32, f32) {
        (self.axes[2].position.max(MIN_SIZE), self.axes[3].position.max(MIN_SIZE))
    }
}

/// Centre x, centre y, width, height of a box (sizes at least [`MIN_SIZE`]).
fn measurement(b: &BoundingBox) -> [f32; 4] {
    [(b.x1 + b.x2) / 2.0, (b.y1 + b.y2) / 2.0, (b.x2 - b.x1).max(MIN_SIZE), (b.y2 - b.y1).max(MIN_SIZE)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn square(x: f32, y: f32, size: f32) -> BoundingBox {
        BoundingBox { x1: x, y1: y, x2: x + size, y2: y + size }
    }

    fn close(a: f32, b: f32, tolerance: f32) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn starts_at_the_observation_and_at_rest() {
        let filter = BoxFilter::new(&square(10.0, 20.0, 50.0));
        assert_eq!(filter.bbox(), square(10.0, 20.0, 50.0));
        assert_eq!(filter.velocity(), (0.0, 0.0));
        let mut predicted = filter;
        predicted.predict(5.0);
        assert_eq!(predicted.bbox(), filter.bbox(), "no velocity, no motion");
    }

    /// A box moving at 100 px/s to the right: the velocity estimate converges, and the prediction
    /// across a gap of 0.6 s lands on the true position — the same at 5 and at 30 frames per second.
    #[test]
    fn learns_a_constant_velocity_at_any_frame_rate_and_predicts_across_a_gap() {
        for fps in [5.0f32, 30.0] {
            let dt = 1.0 / fps;
            let frames = (2.0 * fps) as usize;
            let mut filter = BoxFilter::new(&square(0.0, 100.0, 80.0));
            for n in 1..=frames {
                filter.predict(dt);
                filter.update(&square(100.0 * dt * n as f32, 100.0, 80.0));
            }
            let (vx, vy) = filter.velocity();
            assert!(close(vx, 100.0, 5.0) && close(vy, 0.0, 1.0), "{fps} fps: velocity {vx}, {vy}");
            filter.predict(0.6);
            let expected = square(100.0 * (dt * frames as f32 + 0.6), 100.0, 80.0);
            let predicted = filter.bbox();
            assert!(predicted.iou(&expected) > 0.9, "{fps} fps: {predicted:?} vs {expected:?}");
        }
    }

    #[test]
    fn measurements_pull_the_estimate_most_when_it_is_uncertain() {
        let mut filter = BoxFilter::new(&square(0.0, 0.0, 100.0));
        filter.predict(0.1);
        filter.update(&square(10.0, 0.0, 100.0));
        let first_step = filter.bbox().x1;
        assert!(first_step > 5.0 && first_step <= 10.0, "a fresh track follows its measurement: {first_step}");
        for _ in 0..50 {
            filter.predict(0.1);
            filter.update(&square(10.0, 0.0, 100.0));
        }
        let settled = filter.bbox().x1;
        assert!(close(settled, 10.0, 0.5), "{settled}");
    }

    #[test]
    fn degenerate_inputs_keep_sizes_positive_and_values_finite() {
        let mut filter = BoxFilter::new(&BoundingBox { x1: 5.0, y1: 5.0, x2: 5.0, y2: 5.0 });
        filter.predict(0.2);
        filter.update(&square(5.0, 5.0, 0.0));
        filter.predict(-3.0);
        filter.predict(f32::NAN);
        let b = filter.bbox();
        assert!(b.x2 - b.x1 >= MIN_SIZE && b.y2 - b.y1 >= MIN_SIZE, "{b:?}");
        assert!([b.x1, b.y1, b.x2, b.y2].iter().all(|v| v.is_finite()), "{b:?}");
        // A shrinking box that is lost for a long time stops at one pixel.
        let mut shrinking = BoxFilter::new(&square(0.0, 0.0, 100.0));
        for n in 1..10 {
            shrinking.predict(0.1);
            shrinking.update(&square(0.0, 0.0, 100.0 - 10.0 * n as f32));
        }
        shrinking.predict(60.0);
        let b = shrinking.bbox();
        assert!(b.x2 - b.x1 >= MIN_SIZE - 1e-3, "{b:?}");
    }
}
