//! Step 2 of the definition along one axis: which source pixels every content pixel mixes, and
//! with which weights (bilinear, or Pillow's antialiasing filter).
//!
//! Owns: [`AxisTaps`]. Must not: read pixels.

use super::spec::ResizeFilter;

/// Step 2 along one axis: for every content pixel `i`, the source indices
/// `first[i] .. first[i] + count[i]` and their weights `weights[i · stride ..][..count[i]]`; the
/// rest of each stride is zero. `stride` is the widest tap window.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisTaps {
    pub stride: usize,
    pub first: Vec<u32>,
    pub count: Vec<u32>,
    pub weights: Vec<f32>,
}

impl AxisTaps {
    /// The taps of every content pixel when `src_len` source pixels are scaled to `content_len`
    /// (both at least 1).
    pub fn new(filter: ResizeFilter, src_len: u32, content_len: u32) -> Self {
        match filter {
            ResizeFilter::Bilinear => Self::bilinear(src_len, content_len),
            ResizeFilter::Antialias => Self::antialias(src_len, content_len),
        }
    }

    fn bilinear(src_len: u32, content_len: u32) -> Self {
        let max = (src_len - 1) as f32;
        let mut taps = AxisTaps::empty(2, content_len);
        for i in 0..content_len {
            let s = ((i as f32 + 0.5) * src_len as f32 / content_len as f32 - 0.5).clamp(0.0, max);
            let first = s.floor();
            let frac = s - first;
            let first = first as u32;
            // At the last source pixel s is clamped there, so frac = 0 and one tap says it all.
            let weights: &[f32] = if first + 1 < src_len { &[1.0 - frac, frac] } else { &[1.0 - frac] };
            taps.push(first, weights);
        }
        taps
    }

    fn antialias(src_len: u32, content_len: u32) -> Self {
        let scale = src_len as f64 / content_len as f64;
        let support = scale.max(1.0);
        let inverse_support = 1.0 / support;
        let window = |center: f64| {
            let first = ((center - support + 0.5).floor().max(0.0) as u32).min(src_len - 1);
            let end = ((center + support + 0.5).floor() as u32).min(src_len).max(first + 1);
            (first, end)
        };
        let stride = (0..content_len)
            .map(|i| {
                let (first, end) = window((i as f64 + 0.5) * scale);
                (end - first) as usize
            })
            .max()
            .unwrap_or(1);
        let mut taps = AxisTaps::empty(stride, content_len);
        let mut raw = vec![0.0f64; stride];
        let mut weights = vec![0.0f32; stride];
        for i in 0..content_len {
            let center = (i as f64 + 0.5) * scale;
            let (first, end) = window(center);
            let count = (end - first) as usize;
            for (k, w) in raw[..count].iter_mut().enumerate() {
                let x = ((first as usize + k) as f64 - center + 0.5) * inverse_support;
                *w = (1.0 - x.abs()).max(0.0);
            }
            let sum: f64 = raw[..count].iter().sum();
            for (w, r) in weights[..count].iter_mut().zip(&raw[..count]) {
                *w = if sum != 0.0 { (r / sum) as f32 } else { *r as f32 };
            }
            taps.push(first, &weights[..count]);
        }
        taps
    }

    fn empty(stride: usize, content_len: u32) -> Self {
        let len = content_len as usize;
        AxisTaps {
            stride,
            first: Vec::with_capacity(len),
            count: Vec::with_capacity(len),
            weights: Vec::with_capacity(len * stride),
        }
    }

    fn push(&mut self, first: u32, weights: &[f32]) {
        self.first.push(first);
        self.count.push(weights.len() as u32);
        self.weights.extend_from_slice(weights);
        self.weights.extend(std::iter::repeat_n(0.0, self.stride - weights.len()));
    }

    /// Content pixels covered.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }

    /// First source index and weights of content pixel `i`.
    pub(super) fn taps(&self, i: usize) -> (usize, &[f32]) {
        let start = i * self.stride;
        (self.first[i] as usize, &self.weights[start..start + self.count[i] as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn antialias_taps_widen_with_the_shrink_factor_only() {
        let halving = AxisTaps::new(ResizeFilter::Antialias, 4, 2);
        assert_eq!((halving.stride, halving.first.as_slice(), halving.count.as_slice()), (3, &[0, 1][..], &[3, 3][..]));
        let enlarging = AxisTaps::new(ResizeFilter::Antialias, 2, 4);
        let bilinear = AxisTaps::new(ResizeFilter::Bilinear, 2, 4);
        for i in 0..4 {
            let (first, weights) = enlarging.taps(i);
            let live: Vec<(usize, f32)> =
                weights.iter().enumerate().filter(|(_, w)| **w != 0.0).map(|(k, w)| (first + k, *w)).collect();
            let (first, weights) = bilinear.taps(i);
            let expected: Vec<(usize, f32)> =
                weights.iter().enumerate().filter(|(_, w)| **w != 0.0).map(|(k, w)| (first + k, *w)).collect();
            assert_eq!(live, expected, "content pixel {i}");
        }
    }
}
