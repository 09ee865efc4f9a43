//! Shape checks and views of output tensors shared by the decoders.
//!
//! Owns: recognising `[1, rows, cols]` matrices, checking that a tensor's data length matches its
//! shape, and describing a model's outputs for error messages. Must not: interpret values.

use crate::model::{ModelOutputs, OutputTensor};

use super::error::DecodeError;

/// A row-major `rows × cols` view of a tensor shaped `[1, rows, cols]` or `[rows, cols]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Matrix<'a> {
    pub rows: usize,
    pub cols: usize,
    pub data: &'a [f32],
}

/// `[1, rows, cols]` or `[rows, cols]`, as `(rows, cols)`.
pub(super) fn matrix_dims(tensor: &OutputTensor) -> Option<(usize, usize)> {
    match tensor.shape.as_slice() {
        [1, rows, cols] | [rows, cols] => Some((*rows, *cols)),
        _ => None,
    }
}

/// The tensor as a matrix, if its shape is one; its data length is checked against the shape.
pub(super) fn matrix<'a>(decoder: &'static str, tensor: &'a OutputTensor) -> Result<Option<Matrix<'a>>, DecodeError> {
    match matrix_dims(tensor) {
        Some((rows, cols)) => Ok(Some(Matrix { rows, cols, data: values(decoder, tensor)? })),
        None => Ok(None),
    }
}

/// The tensor's values, after checking that there are exactly as many as its shape says.
pub(super) fn values<'a>(decoder: &'static str, tensor: &'a OutputTensor) -> Result<&'a [f32], DecodeError> {
    let expected = tensor.shape.iter().try_fold(1usize, |product, &dim| product.checked_mul(dim));
    if expected == Some(tensor.data.len()) {
        Ok(&tensor.data)
    } else {
        Err(DecodeError::Tensor {
            decoder,
            tensor: tensor.name.clone(),
            message: format!("has shape {:?} but {} values", tensor.shape, tensor.data.len()),
        })
    }
}

/// The outputs' names and shapes, e.g. "`boxes` [1, 1917, 4], `scores` [1, 1917, 91]".
pub(super) fn describe(outputs: &ModelOutputs) -> String {
    if outputs.tensors.is_empty() {
        return "no outputs".to_string();
    }
    outputs.tensors.iter().map(|t| format!("`{}` {:?}", t.name, t.shape)).collect::<Vec<_>>().join(", ")
}

/// The error for outputs whose count or shapes do not fit the decoder.
pub(super) fn unexpected(decoder: &'static str, expected: &'static str, outputs: &ModelOutputs) -> DecodeError {
    DecodeError::Outputs { decoder, expected, actual: describe(outputs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str, shape: &[usize], len: usize) -> OutputTensor {
        OutputTensor { name: name.into(), shape: shape.to_vec(), data: vec![0.0; len] }
    }

    #[test]
    fn matrices_with_and_without_batch() {
        assert_eq!(matrix_dims(&tensor("a", &[1, 3, 4], 12)), Some((3, 4)));
        assert_eq!(matrix_dims(&tensor("a", &[3, 4], 12)), Some((3, 4)));
        assert_eq!(matrix_dims(&tensor("a", &[2, 3, 4], 24)), None);
        assert_eq!(matrix_dims(&tensor("a", &[12], 12)), None);
    }

    #[test]
    fn data_length_must_match_shape() {
        assert!(values("ssd", &tensor("a", &[1, 3, 4], 12)).is_ok());
        let message = values("ssd", &tensor("a", &[1, 3, 4], 11)).expect_err("short").to_string();
        assert!(message.contains("`a`") && message.contains("11 values"), "{message}");
        assert!(values("ssd", &tensor("a", &[usize::MAX, 2], 0)).is_err());
    }

    #[test]
    fn describes_outputs() {
        let outputs = ModelOutputs { tensors: vec![tensor("boxes", &[1, 2, 4], 8), tensor("scores", &[1, 2, 3], 6)] };
        assert_eq!(describe(&outputs), "`boxes` [1, 2, 4], `scores` [1, 2, 3]");
        assert_eq!(describe(&ModelOutputs::default()), "no outputs");
    }
}
