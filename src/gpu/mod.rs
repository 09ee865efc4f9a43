//! CUDA layer. Placeholder: filled in by its owner.
