//! The raw outputs of one inference: named f32 tensors, row-major, batch first.
//!
//! Owns: [`ModelOutputs`] and splitting batched outputs into one frame's ([`ModelOutputs::row_into`]).
//! Must not: know which backend filled them or what they mean (the decoders do).

/// One output tensor, converted to f32, row-major.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutputTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// All outputs of one inference, in the model's output order. Reused across frames.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelOutputs {
    pub tensors: Vec<OutputTensor>,
}

impl ModelOutputs {
    pub fn by_name(&self, name: &str) -> Option<&OutputTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Copies row `row` of outputs batched over `rows` frames into `out`, as the outputs of that
    /// frame alone (leading dimension 1), reusing `out`'s buffers. Every tensor must have the batch
    /// as its leading dimension.
    pub fn row_into(&self, row: usize, rows: usize, out: &mut ModelOutputs) -> Result<(), String> {
        out.tensors.resize_with(self.tensors.len(), OutputTensor::default);
        for (tensor, target) in self.tensors.iter().zip(&mut out.tensors) {
            if tensor.shape.first() != Some(&rows) || tensor.data.len() % rows != 0 || row >= rows {
                return Err(format!(
                    "output `{}` has shape {:?} and {} values, not a batch of {rows} (row {row})",
                    tensor.name,
                    tensor.shape,
                    tensor.data.len()
                ));
            }
            let per_row = tensor.data.len() / rows;
            target.name.clone_from(&tensor.name);
            target.shape.clone_from(&tensor.shape);
            target.shape[0] = 1;
            target.data.clear();
            target.data.extend_from_slice(&tensor.data[row * per_row..(row + 1) * per_row]);
        }
        Ok(())
    }
}
