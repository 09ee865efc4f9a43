//! Builds ONNX model bytes for tests: declared inputs and outputs, nodes and small constants.

use crate::protobuf::encode::{bytes_field, fixed32_field, varint_field};

/// A dimension for [`value_info`]: `None` is a symbolic `batch`.
pub type TestDim = Option<u64>;

/// A `ValueInfoProto` of a tensor of `element` (an ONNX `DataType` number) with `dims`.
pub fn value_info(name: &str, element: u64, dims: &[TestDim]) -> Vec<u8> {
    let mut shape = Vec::new();
    for dim in dims {
        shape.extend(bytes_field(
            1,
            &match dim {
                Some(value) => varint_field(1, *value),
                None => bytes_field(2, b"batch"),
            },
        ));
    }
    let tensor_type = [varint_field(1, element), bytes_field(2, &shape)].concat();
    [bytes_field(1, name.as_bytes()), bytes_field(2, &bytes_field(1, &tensor_type))].concat()
}

/// A float `TensorProto` named `name` holding `values` as raw data.
pub fn float_tensor(name: &str, values: &[f32]) -> Vec<u8> {
    let raw = values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    [varint_field(1, values.len() as u64), varint_field(2, 1), bytes_field(8, name.as_bytes()), bytes_field(9, &raw)]
        .concat()
}

/// A `NodeProto`.
pub fn node(op_type: &str, inputs: &[&str], outputs: &[&str]) -> Vec<u8> {
    let mut node = Vec::new();
    for input in inputs {
        node.extend(bytes_field(1, input.as_bytes()));
    }
    for output in outputs {
        node.extend(bytes_field(2, output.as_bytes()));
    }
    node.extend(bytes_field(4, op_type.as_bytes()));
    node
}

/// A `Constant` node whose `value_float` attribute is `value`.
pub fn constant_float(output: &str, value: f32) -> Vec<u8> {
    let attribute = [bytes_field(1, b"value_float"), fixed32_field(2, value.to_le_bytes())].concat();
    [node("Constant", &[], &[output]), bytes_field(5, &attribute)].concat()
}

/// A model whose graph has these parts, each a `GraphProto` field already encoded with
/// [`graph_input`], [`graph_output`], [`graph_node`] or [`initializer`].
pub fn model(parts: &[Vec<u8>]) -> Vec<u8> {
    [varint_field(1, 8), bytes_field(2, b"test"), bytes_field(7, &parts.concat())].concat()
}

pub fn graph_input(name: &str, element: u64, dims: &[TestDim]) -> Vec<u8> {
    bytes_field(11, &value_info(name, element, dims))
}

pub fn graph_output(name: &str, element: u64, dims: &[TestDim]) -> Vec<u8> {
    bytes_field(12, &value_info(name, element, dims))
}

pub fn graph_node(node: Vec<u8>) -> Vec<u8> {
    bytes_field(1, &node)
}

pub fn initializer(name: &str, values: &[f32]) -> Vec<u8> {
    bytes_field(5, &float_tensor(name, values))
}

/// ONNX `DataType` numbers.
pub const FLOAT: u64 = 1;
pub const UINT8: u64 = 2;
pub const FLOAT16: u64 = 10;
