//! Reading a `ModelProto`'s main graph straight from the protobuf wire format
//! ([`crate::protobuf`]), bounded and without copying weights: only names, shapes and constants of
//! at most [`MAX_CONSTANT_VALUES`] values are kept, into a [`ModelInterface`].
//!
//! Owns: [`read_file`], [`read`] and their bounds. Must not: trust the bytes: a hostile file ends
//! in an [`OnnxError`], never a panic, a hang or an allocation larger than the file.

use std::collections::HashMap;
use std::path::Path;

use super::error::OnnxError;
use super::interface::{Dim, ElementType, InputScaling, ModelInterface, TensorInfo};
use crate::protobuf::{self, Field, Fields};

/// Constants with more values than this are not read (a scale or a per-channel mean has 1 or 3).
pub const MAX_CONSTANT_VALUES: usize = 3;
/// The longest chain of element-wise operators followed from the first input.
const MAX_PRELUDE_STEPS: usize = 16;
/// Most inputs or outputs kept: real models have a handful.
const MAX_INTERFACE_TENSORS: usize = 64;
/// Most dimensions of one input or output kept.
const MAX_RANK: usize = 8;

/// Reads the interface of the ONNX model in `path` (a regular file within the model size bound).
pub fn read_file(path: &Path) -> Result<ModelInterface, OnnxError> {
    let bytes = crate::sys::files::read(path, crate::sys::files::MAX_MODEL_BYTES)
        .map_err(|error| OnnxError::Read { path: path.to_path_buf(), message: error.to_string() })?;
    read(&bytes)
}

/// Reads the interface of the ONNX model in `model` (the bytes of an `.onnx` file).
pub fn read(model: &[u8]) -> Result<ModelInterface, OnnxError> {
    let mut graph = None;
    let mut producer = String::new();
    for field in Fields::new(model) {
        match field? {
            Field::Bytes(2, name) => producer = String::from_utf8_lossy(name).into_owned(),
            Field::Bytes(7, bytes) => graph = Some(bytes),
            _ => {}
        }
    }
    let graph = graph.ok_or(OnnxError::NotAModel("it has no graph"))?;

    // Pass 1: declared inputs and outputs, initializer names and small constants.
    let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
    let mut constants = HashMap::new();
    let mut initializers = std::collections::HashSet::new();
    let mut weight_bytes = 0u64;
    for field in Fields::new(graph) {
        match field? {
            Field::Bytes(11, info) if inputs.len() < MAX_INTERFACE_TENSORS => inputs.push(value_info(info)?),
            Field::Bytes(12, info) if outputs.len() < MAX_INTERFACE_TENSORS => outputs.push(value_info(info)?),
            Field::Bytes(5, tensor) => {
                let (name, values) = small_tensor(tensor)?;
                if let Some(values) = values {
                    constants.insert(String::from_utf8_lossy(name).into_owned(), values);
                }
                initializers.insert(name);
                weight_bytes = weight_bytes.saturating_add(initializer_bytes(tensor)?);
            }
            _ => {}
        }
    }
    // Older exports list weights among the inputs too.
    inputs.retain(|input: &TensorInfo| !initializers.contains(input.name.as_bytes()));
    if inputs.is_empty() && outputs.is_empty() {
        return Err(OnnxError::NotAModel("its graph declares no inputs and no outputs"));
    }

    // Pass 2: the nodes, in their (topological) order.
    let mut prelude = inputs.first().map(|input| Prelude::new(&input.name));
    for field in Fields::new(graph) {
        let Field::Bytes(1, node) = field? else { continue };
        let mut node = Node::read(node)?;
        if node.op_type == b"Constant" {
            if let (Some(output), Some(values)) = (node.outputs.first(), node.constant_value.take()) {
                constants.insert(String::from_utf8_lossy(output).into_owned(), values);
            }
        }
        if let Some(chain) = prelude.as_mut() {
            chain.step(&node, &constants);
        }
        for output in outputs.iter_mut().filter(|output| node.outputs.contains(&output.name.as_bytes())) {
            output.producer = Some(String::from_utf8_lossy(node.op_type).into_owned());
        }
    }
    let input_scaling = prelude.map_or(InputScaling::IDENTITY, |chain| chain.scaling);
    Ok(ModelInterface { inputs, outputs, input_scaling, producer, weight_bytes })
}

/// The bytes of one initializer (`TensorProto`): its message, which holds inline data, plus the
/// `length` entry of its `external_data` (13: `StringStringEntryProto` key 1, value 2), if any.
fn initializer_bytes(tensor: &[u8]) -> Result<u64, OnnxError> {
    let mut bytes = tensor.len() as u64;
    for field in Fields::new(tensor) {
        let Field::Bytes(13, entry) = field? else { continue };
        let (mut key, mut value) = (&b""[..], &b""[..]);
        for field in Fields::new(entry) {
            match field? {
                Field::Bytes(1, text) => key = text,
                Field::Bytes(2, text) => value = text,
                _ => {}
            }
        }
        if key == b"length" {
            let length = std::str::from_utf8(value).ok().and_then(|text| text.parse::<u64>().ok());
            bytes = bytes.saturating_add(length.unwrap_or(0));
        }
    }
    Ok(bytes)
}

/// A `ValueInfoProto`: name (1), type (2) → `tensor_type` (1) → `elem_type` (1), `shape` (2) →
/// `dim` (1) → `dim_value` (1) or `dim_param` (2).
fn value_info(bytes: &[u8]) -> Result<TensorInfo, OnnxError> {
    let mut info = TensorInfo { name: String::new(), element: ElementType::Other(0), dims: None, producer: None };
    for field in Fields::new(bytes) {
        match field? {
            Field::Bytes(1, name) => info.name = String::from_utf8_lossy(name).into_owned(),
            Field::Bytes(2, type_proto) => {
                for field in Fields::new(type_proto) {
                    if let Field::Bytes(1, tensor_type) = field? {
                        tensor_type_into(tensor_type, &mut info)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(info)
}

fn tensor_type_into(bytes: &[u8], info: &mut TensorInfo) -> Result<(), OnnxError> {
    for field in Fields::new(bytes) {
        match field? {
            Field::Varint(1, element) => info.element = ElementType::from_onnx(element),
            Field::Bytes(2, shape) => {
                let mut dims = Vec::new();
                for field in Fields::new(shape) {
                    let Field::Bytes(1, dim) = field? else { continue };
                    let mut value = Dim::Symbolic;
                    for field in Fields::new(dim) {
                        if let Field::Varint(1, fixed) = field? {
                            // A negative dim_value (two's complement) is not a size.
                            value = if i64::try_from(fixed).is_ok() { Dim::Fixed(fixed) } else { Dim::Symbolic };
                        }
                    }
                    if dims.len() < MAX_RANK {
                        dims.push(value);
                    }
                }
                info.dims = Some(dims);
            }
            _ => {}
        }
    }
    Ok(())
}

/// A `TensorProto`'s name, and its values when it is a float tensor of at most
/// [`MAX_CONSTANT_VALUES`] values stored inside the file.
fn small_tensor(bytes: &[u8]) -> Result<(&[u8], Option<Vec<f32>>), OnnxError> {
    let (mut name, mut data_type, mut count) = (&b""[..], 0, 1usize);
    let (mut raw, mut floats) = (None, Vec::new());
    for field in Fields::new(bytes) {
        match field? {
            Field::Bytes(8, value) => name = value,
            Field::Varint(2, value) => data_type = value,
            Field::Varint(1, dim) => count = count.saturating_mul(usize::try_from(dim).unwrap_or(usize::MAX)),
            Field::Bytes(1, packed) => {
                for dim in protobuf::packed_varints(packed) {
                    count = count.saturating_mul(usize::try_from(dim?).unwrap_or(usize::MAX));
                }
            }
            Field::Bytes(9, value) => raw = Some(value),
            Field::Bytes(4, packed) if packed.len() <= 4 * MAX_CONSTANT_VALUES => {
                floats.extend(packed.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
            }
            Field::Fixed32(4, value) if floats.len() < MAX_CONSTANT_VALUES => floats.push(f32::from_le_bytes(value)),
            _ => {}
        }
    }
    if count == 0 || count > MAX_CONSTANT_VALUES {
        return Ok((name, None));
    }
    let values = match (data_type, raw) {
        (1, Some(raw)) if raw.len() == 4 * count => {
            raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
        }
        (10, Some(raw)) if raw.len() == 2 * count => {
            raw.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect()
        }
        (11, Some(raw)) if raw.len() == 8 * count => raw
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32)
            .collect(),
        (1, None) if floats.len() == count => floats,
        _ => return Ok((name, None)),
    };
    Ok((name, Some(values)))
}

/// The parts of a `NodeProto` the reader uses.
struct Node<'a> {
    op_type: &'a [u8],
    inputs: Vec<&'a [u8]>,
    outputs: Vec<&'a [u8]>,
    /// A `Constant` node's small float `value` (or `value_float`).
    constant_value: Option<Vec<f32>>,
}

impl<'a> Node<'a> {
    fn read(bytes: &'a [u8]) -> Result<Node<'a>, OnnxError> {
        let mut node = Node { op_type: b"", inputs: Vec::new(), outputs: Vec::new(), constant_value: None };
        for field in Fields::new(bytes) {
            match field? {
                Field::Bytes(1, input) => node.inputs.push(input),
                Field::Bytes(2, output) => node.outputs.push(output),
                Field::Bytes(4, op_type) => node.op_type = op_type,
                Field::Bytes(5, attribute) => {
                    for field in Fields::new(attribute) {
                        match field? {
                            Field::Bytes(5, tensor) => node.constant_value = small_tensor(tensor)?.1,
                            Field::Fixed32(2, value) => node.constant_value = Some(vec![f32::from_le_bytes(value)]),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if node.op_type != b"Constant" {
            node.constant_value = None;
        }
        Ok(node)
    }
}

/// Follows the first input through element-wise operators with constant operands.
struct Prelude {
    /// The tensor that currently holds the scaled input; `None` once the chain has ended.
    current: Option<String>,
    steps: usize,
    scaling: InputScaling,
}

impl Prelude {
    fn new(input: &str) -> Prelude {
        Prelude { current: Some(input.to_string()), steps: 0, scaling: InputScaling::IDENTITY }
    }

    fn step(&mut self, node: &Node<'_>, constants: &HashMap<String, Vec<f32>>) {
        let Some(current) = self.current.as_deref() else { return };
        let Some(position) = node.inputs.iter().position(|input| *input == current.as_bytes()) else { return };
        if node.op_type == b"Shape" {
            return;
        }
        self.steps += 1;
        let next = node.outputs.first().map(|output| String::from_utf8_lossy(output).into_owned());
        let other = node
            .inputs
            .get(1 - position.min(1))
            .filter(|_| node.inputs.len() == 2)
            .and_then(|name| constants.get(String::from_utf8_lossy(name).as_ref()))
            .and_then(|values| per_channel(values));
        let passes_through = matches!(
            node.op_type,
            b"Cast" | b"Identity" | b"Transpose" | b"Reshape" | b"Unsqueeze" | b"Squeeze" | b"Flatten"
        );
        let applied = match (node.op_type, other) {
            _ if passes_through => true,
            (b"Div", Some(c)) if position == 0 && c.iter().all(|v| *v != 0.0) => {
                self.apply(|s, o, i| (s / c[i], o / c[i]))
            }
            (b"Mul", Some(c)) => self.apply(|s, o, i| (s * c[i], o * c[i])),
            (b"Add", Some(c)) => self.apply(|s, o, i| (s, o + c[i])),
            (b"Sub", Some(c)) if position == 0 => self.apply(|s, o, i| (s, o - c[i])),
            (b"Sub", Some(c)) => self.apply(|s, o, i| (-s, c[i] - o)),
            _ => false,
        };
        self.current = next.filter(|_| applied && self.steps < MAX_PRELUDE_STEPS);
    }

    fn apply(&mut self, map: impl Fn(f32, f32, usize) -> (f32, f32)) -> bool {
        for channel in 0..3 {
            let (scale, offset) = map(self.scaling.scale[channel], self.scaling.offset[channel], channel);
            self.scaling.scale[channel] = scale;
            self.scaling.offset[channel] = offset;
        }
        true
    }
}

/// One value for all three channels, or one per channel.
fn per_channel(values: &[f32]) -> Option<[f32; 3]> {
    match *values {
        [value] if value.is_finite() => Some([value; 3]),
        [r, g, b] if [r, g, b].iter().all(|v| v.is_finite()) => Some([r, g, b]),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
