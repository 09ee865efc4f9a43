//! A track's appearance: a few prototypes, each the L2-normalised weighted average of the
//! embeddings of the views it gathers, so that a person seen from the front and from the back
//! keeps both looks instead of one blurred mean.
//!
//! Owns: [`Appearance`], folding an embedding (or a later appearance of the same track) into the
//! prototype it resembles (or starting a new one, up to [`MAX_PROTOTYPES`]), and the similarity of two appearances: the best cosine between
//! their prototypes. Must not: choose crops or weights (the caller does: a detection's score), or
//! keep the embeddings themselves (a prototype is one vector, whatever it gathered).

use super::embedding::{similarity, Embedding};

/// Most prototypes of one track: a few distinct views (front, back, side) at one vector each.
pub const MAX_PROTOTYPES: usize = 3;
/// An embedding at least this similar to a prototype is another look at the same view and is
/// folded into it; a less similar one starts a prototype while there is room.
pub const SAME_VIEW: f32 = 0.9;

/// One view: the direction of the weighted sum of its embeddings, and that sum's length (with the
/// direction, the sum itself, so that folding in another embedding is exact).
#[derive(Debug, Clone, PartialEq)]
struct Prototype {
    unit: Vec<f32>,
    sum_length: f64,
}

impl Prototype {
    fn new(embedding: &Embedding, weight: f64) -> Prototype {
        Prototype { unit: embedding.values().to_vec(), sum_length: weight }
    }

    /// Adds `other`'s sum (its direction × its length) to this one's. A sum that cancels out
    /// (opposite views) keeps its direction.
    fn fold(&mut self, other: &Prototype) {
        let sum: Vec<f64> = self
            .unit
            .iter()
            .zip(&other.unit)
            .map(|(&unit, &theirs)| f64::from(unit) * self.sum_length + f64::from(theirs) * other.sum_length)
            .collect();
        let length = sum.iter().map(|value| value * value).sum::<f64>().sqrt();
        if length.is_finite() && length > 0.0 {
            self.unit = sum.iter().map(|value| (value / length) as f32).collect();
            self.sum_length = length;
        }
    }
}

/// What a track looks like so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Appearance {
    prototypes: Vec<Prototype>,
}

impl Appearance {
    /// Folds `embedding` in with `weight` (a detection score; taken in 0.001..=1, 1 when it is not
    /// a number). An embedding of another length than the first one's (another model's) is
    /// ignored: `false`.
    pub fn add(&mut self, embedding: &Embedding, weight: f32) -> bool {
        if self.prototypes.first().is_some_and(|first| first.unit.len() != embedding.dimensions()) {
            return false;
        }
        let weight = if weight.is_finite() { f64::from(weight.clamp(0.001, 1.0)) } else { 1.0 };
        self.fold_in(Prototype::new(embedding, weight));
        true
    }

    /// Folds `later`, what the same track looked like since (another model's is ignored:
    /// `false`), in as if its embeddings had been added here: each of its prototypes into the one
    /// it resembles, or as a prototype of its own while there is room.
    pub fn absorb(&mut self, later: Appearance) -> bool {
        let (Some(mine), Some(theirs)) = (self.prototypes.first(), later.prototypes.first()) else {
            if self.prototypes.is_empty() {
                *self = later;
            }
            return true;
        };
        if mine.unit.len() != theirs.unit.len() {
            return false;
        }
        for prototype in later.prototypes {
            self.fold_in(prototype);
        }
        true
    }

    /// `view` folded into the nearest prototype when it is another look at it (or when there is
    /// no room for another), else kept as a prototype of its own.
    fn fold_in(&mut self, view: Prototype) {
        let nearest = self
            .prototypes
            .iter()
            .enumerate()
            .map(|(index, prototype)| (index, similarity(&prototype.unit, &view.unit)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        match nearest {
            Some((index, closeness)) if closeness >= SAME_VIEW || self.prototypes.len() >= MAX_PROTOTYPES => {
                self.prototypes[index].fold(&view)
            }
            _ => self.prototypes.push(view),
        }
    }

    /// The best cosine similarity between a prototype of each; `None` when either has no
    /// embedding yet.
    pub fn similarity(&self, other: &Appearance) -> Option<f32> {
        self.prototypes
            .iter()
            .flat_map(|mine| other.prototypes.iter().map(move |theirs| similarity(&mine.unit, &theirs.unit)))
            .max_by(f32::total_cmp)
    }

    pub fn is_empty(&self) -> bool {
        self.prototypes.is_empty()
    }

    /// Heap bytes its prototypes take.
    pub fn bytes(&self) -> usize {
        self.prototypes.capacity() * std::mem::size_of::<Prototype>()
            + self
                .prototypes
                .iter()
                .map(|prototype| prototype.unit.capacity() * std::mem::size_of::<f32>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(values: &[f32]) -> Embedding {
        Embedding::normalised(values).expect("a direction")
    }

    /// The directions of `appearance`'s prototypes, in the order they began.
    fn directions(appearance: &Appearance) -> Vec<&[f32]> {
        appearance.prototypes.iter().map(|prototype| prototype.unit.as_slice()).collect()
    }

    #[test]
    fn similar_views_fold_into_one_prototype_as_a_weighted_average_of_directions() {
        let mut appearance = Appearance::default();
        assert!(appearance.add(&unit(&[1.0, 0.1, 0.0]), 1.0));
        assert!(appearance.add(&unit(&[1.0, -0.1, 0.0]), 1.0));
        let [mean] = directions(&appearance)[..] else { panic!("one prototype: {appearance:?}") };
        assert!((mean[0] - 1.0).abs() < 1e-6 && mean[1].abs() < 1e-6, "{mean:?}");
        // A heavier view pulls the average towards it.
        let mut weighted = Appearance::default();
        weighted.add(&unit(&[1.0, 0.2, 0.0]), 0.9);
        weighted.add(&unit(&[1.0, -0.2, 0.0]), 0.1);
        assert!(directions(&weighted)[0][1] > 0.1, "{weighted:?}");
    }

    #[test]
    fn distinct_views_keep_prototypes_of_their_own_up_to_the_limit() {
        let mut appearance = Appearance::default();
        for axis in 0..5 {
            let mut values = [0.0f32; 5];
            values[axis] = 1.0;
            appearance.add(&unit(&values), 0.5);
        }
        assert_eq!(appearance.prototypes.len(), MAX_PROTOTYPES);
        // The last two views were folded into the nearest prototypes: still unit vectors.
        let lengths: Vec<f32> =
            appearance.prototypes.iter().map(|p| p.unit.iter().map(|v| v * v).sum::<f32>().sqrt()).collect();
        assert!(lengths.iter().all(|length| (length - 1.0).abs() < 1e-5), "{lengths:?}");
    }

    #[test]
    fn two_appearances_are_as_similar_as_their_closest_prototypes() {
        let (mut front_and_back, mut back) = (Appearance::default(), Appearance::default());
        front_and_back.add(&unit(&[1.0, 0.0, 0.0]), 1.0);
        front_and_back.add(&unit(&[0.0, 1.0, 0.0]), 1.0);
        back.add(&unit(&[0.1, 1.0, 0.0]), 1.0);
        let expected = unit(&[0.1, 1.0, 0.0]).values()[1];
        assert!((front_and_back.similarity(&back).expect("both seen") - expected).abs() < 1e-6);
        assert_eq!(Appearance::default().similarity(&back), None);
    }

    #[test]
    fn another_models_embedding_and_odd_weights_do_not_spoil_an_appearance() {
        let mut appearance = Appearance::default();
        appearance.add(&unit(&[1.0, 0.0]), f32::NAN);
        assert!(!appearance.add(&unit(&[1.0, 0.0, 0.0]), 1.0), "3 dimensions after 2");
        appearance.add(&unit(&[-1.0, 0.0]), 1.0);
        assert_eq!(directions(&appearance), [&[1.0f32, 0.0][..], &[-1.0, 0.0][..]], "the 3-d one left out");
        assert!(appearance.bytes() >= 2 * 2 * std::mem::size_of::<f32>());
    }

    #[test]
    fn a_later_appearance_folds_in_as_if_its_embeddings_had_been_added_here() {
        let views = [unit(&[1.0, 0.1, 0.0]), unit(&[0.0, 1.0, 0.0]), unit(&[1.0, -0.1, 0.0])];
        let mut one_by_one = Appearance::default();
        for view in &views {
            one_by_one.add(view, 0.5);
        }
        let mut earlier = Appearance::default();
        earlier.add(&views[0], 0.5);
        let mut later = Appearance::default();
        later.add(&views[1], 0.5);
        later.add(&views[2], 0.5);
        assert!(earlier.absorb(later));
        let (folded, added) = (directions(&earlier), directions(&one_by_one));
        assert_eq!(folded.len(), 2);
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(a, b)| (a - b).abs() < 1e-6);
        assert!(folded.iter().zip(&added).all(|(a, b)| close(a, b)), "{folded:?} against {added:?}");
        let mut empty = Appearance::default();
        assert!(empty.absorb(one_by_one.clone()));
        assert_eq!(empty, one_by_one);
        let mut other_model = Appearance::default();
        other_model.add(&unit(&[1.0, 0.0]), 1.0);
        assert!(!empty.absorb(other_model), "2 dimensions after 3");
        assert_eq!(empty, one_by_one);
    }

    proptest::proptest! {
        #![proptest_config(crate::proptest_support::config(256))]

        /// Any model output (NaN, infinities, zeros, huge values, other lengths) gives either no
        /// embedding or one that keeps appearances finite and similarities in -1..=1.
        #[test]
        fn any_outputs_keep_appearances_finite_and_similarities_in_range(
            rows in proptest::collection::vec(
                proptest::collection::vec(
                    proptest::prop_oneof![proptest::num::f32::ANY, -10.0f32..10.0],
                    3..5,
                ),
                0..12,
            ),
            weights in proptest::collection::vec(proptest::num::f32::ANY, 12),
        ) {
            let (mut a, mut b) = (Appearance::default(), Appearance::default());
            for (index, row) in rows.iter().enumerate() {
                let Some(embedding) = Embedding::normalised(row) else { continue };
                let target = if index % 2 == 0 { &mut a } else { &mut b };
                target.add(&embedding, weights[index]);
            }
            for appearance in [&a, &b] {
                proptest::prop_assert!(appearance.prototypes.len() <= MAX_PROTOTYPES);
                for direction in directions(appearance) {
                    proptest::prop_assert!(direction.iter().all(|value| value.is_finite()), "{:?}", direction);
                }
            }
            if let Some(similarity) = a.similarity(&b) {
                proptest::prop_assert!((-1.0..=1.0).contains(&similarity), "{}", similarity);
            }
        }
    }
}
