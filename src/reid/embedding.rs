//! One crop's embedding as re-identification compares it: a unit vector (L2-normalised), so that
//! the cosine similarity of two is their dot product.
//!
//! Owns: [`Embedding`], normalising a model's output row, and the similarity of two. Must not:
//! know which model made it or how many dimensions one has (two of different lengths are not
//! similar at all).

/// A unit vector: finite values whose squared sum is 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedding(Vec<f32>);

impl Embedding {
    /// `values` scaled to unit length; `None` when a value is not finite or all are 0 (a model's
    /// output that says nothing about the crop).
    pub fn normalised(values: &[f32]) -> Option<Embedding> {
        let length = values.iter().map(|&value| f64::from(value) * f64::from(value)).sum::<f64>().sqrt();
        if !length.is_finite() || length == 0.0 {
            return None;
        }
        Some(Embedding(values.iter().map(|&value| (f64::from(value) / length) as f32).collect()))
    }

    pub fn values(&self) -> &[f32] {
        &self.0
    }

    pub fn dimensions(&self) -> usize {
        self.0.len()
    }

    /// The cosine similarity, in -1..=1; 0 for embeddings of different lengths (another model's).
    pub fn similarity(&self, other: &Embedding) -> f32 {
        similarity(&self.0, &other.0)
    }
}

/// The dot product of two unit vectors, clamped to -1..=1 against rounding; 0 when their lengths
/// differ.
pub(super) fn similarity(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    dot.clamp(-1.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_embedding_is_scaled_to_unit_length_and_nothing_is_refused() {
        let unit = Embedding::normalised(&[3.0, 4.0]).expect("a direction");
        assert_eq!(unit.values(), [0.6, 0.8]);
        assert_eq!(Embedding::normalised(&[0.0, 0.0]), None);
        assert_eq!(Embedding::normalised(&[1.0, f32::NAN]), None);
        assert_eq!(Embedding::normalised(&[f32::INFINITY, 1.0]), None);
        assert_eq!(Embedding::normalised(&[]), None);
        let huge = Embedding::normalised(&[f32::MAX, f32::MAX]).expect("no overflow in f64");
        assert!((huge.values()[0] - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
    }

    #[test]
    fn similarity_is_the_cosine_and_other_lengths_are_not_similar() {
        let a = Embedding::normalised(&[1.0, 0.0]).expect("a");
        let b = Embedding::normalised(&[1.0, 1.0]).expect("b");
        assert!((a.similarity(&b) - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-6);
        assert_eq!(a.similarity(&a), 1.0);
        let opposite = Embedding::normalised(&[-2.0, 0.0]).expect("-a");
        assert_eq!(a.similarity(&opposite), -1.0);
        let longer = Embedding::normalised(&[1.0, 0.0, 0.0]).expect("3-d");
        assert_eq!(a.similarity(&longer), 0.0);
    }
}
