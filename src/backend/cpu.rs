//! CPU backend (tract-onnx). Placeholder: filled in by its owner.
