//! The files an ONNX model keeps tensor data in ("external data"), read straight from the protobuf
//! wire format.
//!
//! Owns: walking a `ModelProto`'s bytes down to every `TensorProto` that can hold weights
//! (initializers, sparse initializers, constant attributes, the subgraphs of `If`/`Loop`/`Scan`,
//! functions, training info) and collecting the `location` of each one whose `data_location` is
//! `EXTERNAL`; and whether any node of the model is a quantize/dequantize op
//! ([`has_quantize_nodes`]: what `engine.precision = "int8"` needs, since no calibration is run);
//! and the main graph's inputs with their dimensions ([`graph_inputs`], checked against
//! `model.input` before a build).
//! Must not: decode tensor contents or copy weights (a model can be hundreds of MB;
//! only location strings are copied), open the files it finds (the engine cache hashes them), or
//! trust the input: it is bounded in nesting depth and fails cleanly on malformed bytes.
//!
//! Why not a protobuf crate: decoding a `ModelProto` with generated types copies every weight
//! into memory a second time, on every start (the cache key needs this list before it can look
//! anything up), which on an 8 GB Jetson is what the engine needs. The wire format needed here is
//! five rules, and the walk skips everything it does not need without copying it.

use std::collections::BTreeSet;

use crate::protobuf::{Field, Fields, WireError, MAX_DEPTH};

/// `TensorProto.DataLocation.EXTERNAL`.
const DATA_LOCATION_EXTERNAL: u64 = 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OnnxError {
    #[error("not a valid ONNX (protobuf) file: {0}")]
    Malformed(#[from] WireError),
    #[error("not a valid ONNX file: an external-data location is not UTF-8")]
    LocationNotUtf8,
}

/// The message types on the way from a model to its tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Message {
    Model,
    TrainingInfo,
    Function,
    Graph,
    Node,
    Attribute,
    SparseTensor,
    Tensor,
    StringEntry,
}

impl Message {
    /// The message a length-delimited field of `self` holds, for the fields that lead to tensors
    /// (field numbers from onnx.proto).
    fn child(self, field: u64) -> Option<Message> {
        use Message::*;
        match (self, field) {
            (Model, 7) => Some(Graph),
            (Model, 20) => Some(TrainingInfo),
            (Model, 25) => Some(Function),
            (TrainingInfo, 1 | 2) => Some(Graph),
            (Function, 7) => Some(Node),
            (Graph, 1) => Some(Node),
            (Graph, 5) => Some(Tensor),
            (Graph, 15) => Some(SparseTensor),
            (Node, 5) => Some(Attribute),
            (Attribute, 5 | 10) => Some(Tensor),
            (Attribute, 6 | 11) => Some(Graph),
            (Attribute, 22 | 23) => Some(SparseTensor),
            (SparseTensor, 1 | 2) => Some(Tensor),
            (Tensor, 13) => Some(StringEntry),
            _ => None,
        }
    }
}

/// The `location`s of every tensor in `model` (the bytes of an `.onnx` file) whose data is stored
/// externally, deduplicated and sorted. Paths are as written in the model: relative to its
/// directory.
pub fn external_data_locations(model: &[u8]) -> Result<BTreeSet<String>, OnnxError> {
    let mut locations = BTreeSet::new();
    walk(Message::Model, model, 0, &mut locations)?;
    Ok(locations)
}

/// Whether any node of `model` (its graph, subgraphs of `If`/`Loop`/`Scan`, functions, training
/// graphs) is a `QuantizeLinear` or `DequantizeLinear`: the Q/DQ nodes of an explicitly quantized
/// model, from which TensorRT builds INT8 kernels without calibration.
pub fn has_quantize_nodes(model: &[u8]) -> Result<bool, OnnxError> {
    find_quantize_node(Message::Model, model, 0)
}

/// One input of the main graph: its name and dimensions (`None`: symbolic or unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphInput {
    pub name: String,
    pub dims: Vec<Option<i64>>,
}

/// The main graph's inputs that are not initializers (older exports list weights as inputs too),
/// in order.
pub fn graph_inputs(model: &[u8]) -> Result<Vec<GraphInput>, OnnxError> {
    let mut graph = None;
    for field in Fields::new(model) {
        if let Field::Bytes(7, bytes) = field? {
            graph = Some(bytes);
        }
    }
    let Some(graph) = graph else { return Ok(Vec::new()) };
    let (mut inputs, mut initializers) = (Vec::new(), BTreeSet::new());
    for field in Fields::new(graph) {
        match field? {
            Field::Bytes(11, value_info) => inputs.push(value_info_input(value_info)?),
            Field::Bytes(5, tensor) => {
                for field in Fields::new(tensor) {
                    if let Field::Bytes(8, name) = field? {
                        initializers.insert(String::from_utf8_lossy(name).into_owned());
                    }
                }
            }
            _ => {}
        }
    }
    inputs.retain(|input| !initializers.contains(&input.name));
    Ok(inputs)
}

/// A `ValueInfoProto`: name (1), type (2) → `tensor_type` (1) → `shape` (2) → `dim` (1) →
/// `dim_value` (1) or `dim_param` (2).
fn value_info_input(bytes: &[u8]) -> Result<GraphInput, OnnxError> {
    fn sub(bytes: &[u8], number: u64) -> Result<Vec<&[u8]>, OnnxError> {
        let mut found = Vec::new();
        for field in Fields::new(bytes) {
            if let Field::Bytes(n, child) = field? {
                if n == number {
                    found.push(child);
                }
            }
        }
        Ok(found)
    }
    let mut input = GraphInput { name: String::new(), dims: Vec::new() };
    if let Some(name) = sub(bytes, 1)?.first() {
        input.name = String::from_utf8_lossy(name).into_owned();
    }
    for type_proto in sub(bytes, 2)? {
        for tensor_type in sub(type_proto, 1)? {
            for shape in sub(tensor_type, 2)? {
                for dim in sub(shape, 1)? {
                    let mut value = None;
                    for field in Fields::new(dim) {
                        if let Field::Varint(1, v) = field? {
                            value = i64::try_from(v).ok().filter(|v| *v > 0);
                        }
                    }
                    input.dims.push(value);
                }
            }
        }
    }
    Ok(input)
}

fn find_quantize_node(message: Message, bytes: &[u8], depth: usize) -> Result<bool, OnnxError> {
    if depth > MAX_DEPTH {
        return Err(WireError::TooDeep.into());
    }
    for field in Fields::new(bytes) {
        match (message, field?) {
            // NodeProto.op_type
            (Message::Node, Field::Bytes(4, op)) if op == b"QuantizeLinear" || op == b"DequantizeLinear" => {
                return Ok(true)
            }
            (_, Field::Bytes(number, child)) => {
                // Tensors hold weights, never nodes: skipped unread.
                let nodes_inside = message
                    .child(number)
                    .filter(|kind| !matches!(kind, Message::Tensor | Message::SparseTensor | Message::StringEntry));
                if let Some(kind) = nodes_inside {
                    if find_quantize_node(kind, child, depth + 1)? {
                        return Ok(true);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(false)
}

fn walk(message: Message, bytes: &[u8], depth: usize, out: &mut BTreeSet<String>) -> Result<(), OnnxError> {
    if depth > MAX_DEPTH {
        return Err(WireError::TooDeep.into());
    }
    let mut external = false;
    let mut locations = Vec::new();
    for field in Fields::new(bytes) {
        match (message, field?) {
            (Message::Tensor, Field::Varint(14, location)) => external = location == DATA_LOCATION_EXTERNAL,
            (Message::Tensor, Field::Bytes(13, entry)) => {
                if let Some(location) = location_entry(entry)? {
                    locations.push(location);
                }
            }
            (_, Field::Bytes(number, child)) => {
                if let Some(kind) = message.child(number) {
                    walk(kind, child, depth + 1, out)?;
                }
            }
            _ => {}
        }
    }
    if external {
        out.extend(locations);
    }
    Ok(())
}

/// The value of a `StringStringEntryProto` whose key is `location`.
fn location_entry(entry: &[u8]) -> Result<Option<String>, OnnxError> {
    let (mut key, mut value) = (None, None);
    for field in Fields::new(entry) {
        match field? {
            Field::Bytes(1, bytes) => key = Some(bytes),
            Field::Bytes(2, bytes) => value = Some(bytes),
            _ => {}
        }
    }
    match (key, value) {
        (Some(b"location"), Some(value)) => {
            std::str::from_utf8(value).map(|location| Some(location.to_owned())).map_err(|_| OnnxError::LocationNotUtf8)
        }
        _ => Ok(None),
    }
}

/// Writes ONNX protobuf messages for tests (here and in the engine cache's).
#[cfg(test)]
pub(crate) mod encode {
    pub use crate::protobuf::encode::{bytes_field, varint_field};

    /// A `TensorProto` named `name`, stored externally in `location` when given, else with 16
    /// bytes of `raw_data`.
    pub fn tensor(name: &str, location: Option<&str>) -> Vec<u8> {
        let mut tensor = bytes_field(8, name.as_bytes());
        tensor.extend(varint_field(2, 1));
        match location {
            Some(location) => {
                let mut entry = bytes_field(1, b"location");
                entry.extend(bytes_field(2, location.as_bytes()));
                tensor.extend(bytes_field(13, &entry));
                let mut offset = bytes_field(1, b"offset");
                offset.extend(bytes_field(2, b"0"));
                tensor.extend(bytes_field(13, &offset));
                tensor.extend(varint_field(14, 1));
            }
            None => tensor.extend(bytes_field(9, &[7u8; 16])),
        }
        tensor
    }

    /// A `ModelProto` whose graph has these initializers (`(name, location)`).
    pub fn model(initializers: &[(&str, Option<&str>)]) -> Vec<u8> {
        let mut graph = bytes_field(2, b"main");
        for (name, location) in initializers {
            graph.extend(bytes_field(5, &tensor(name, *location)));
        }
        let mut model = varint_field(1, 8);
        model.extend(bytes_field(7, &graph));
        model
    }
}

#[cfg(test)]
mod tests {
    use super::encode::*;
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// A `ModelProto` whose graph has one node of each `op_type`; `nested` puts them in the
    /// `then_branch` of an `If` instead.
    fn model_with_nodes(ops: &[&str], nested: bool) -> Vec<u8> {
        let mut graph = bytes_field(2, b"main");
        for op in ops {
            graph.extend(bytes_field(1, &bytes_field(4, op.as_bytes())));
        }
        let graph = if nested {
            let attribute = [bytes_field(1, b"then_branch"), bytes_field(6, &graph)].concat();
            let node = [bytes_field(4, b"If"), bytes_field(5, &attribute)].concat();
            [bytes_field(2, b"outer"), bytes_field(1, &node)].concat()
        } else {
            graph
        };
        [varint_field(1, 8), bytes_field(7, &graph)].concat()
    }

    /// A `ValueInfoProto` for an input `name` with these dims (`None`: a `dim_param`).
    pub(crate) fn input(name: &str, dims: &[Option<u64>]) -> Vec<u8> {
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
        let tensor_type = [varint_field(1, 1), bytes_field(2, &shape)].concat();
        [bytes_field(1, name.as_bytes()), bytes_field(2, &bytes_field(1, &tensor_type))].concat()
    }

    #[test]
    fn graph_inputs_are_the_inputs_that_are_not_weights() {
        let mut graph = bytes_field(2, b"main");
        graph.extend(bytes_field(11, &input("images", &[None, Some(3), Some(640), Some(640)])));
        graph.extend(bytes_field(11, &input("w", &[Some(16)])));
        graph.extend(bytes_field(5, &tensor("w", None)));
        let model = [varint_field(1, 8), bytes_field(7, &graph)].concat();
        let inputs = graph_inputs(&model).expect("inputs");
        assert_eq!(inputs, [GraphInput { name: "images".into(), dims: vec![None, Some(3), Some(640), Some(640)] }]);
        assert_eq!(graph_inputs(b""), Ok(Vec::new()));
    }

    #[test]
    fn quantize_nodes_are_found_anywhere_in_the_model() {
        assert_eq!(has_quantize_nodes(&model_with_nodes(&["Conv", "Relu"], false)), Ok(false));
        assert_eq!(has_quantize_nodes(&model_with_nodes(&["QuantizeLinear", "Conv"], false)), Ok(true));
        assert_eq!(has_quantize_nodes(&model_with_nodes(&["Conv", "DequantizeLinear"], true)), Ok(true));
        assert_eq!(has_quantize_nodes(&model(&[("w", None)])), Ok(false));
        assert!(has_quantize_nodes(&[0x3a, 0x05, 0x0a]).is_err(), "truncated bytes are an error, not a panic");
    }

    #[test]
    fn a_model_without_external_data_lists_nothing() {
        assert_eq!(external_data_locations(&model(&[("w", None), ("b", None)])), Ok(BTreeSet::new()));
        assert_eq!(external_data_locations(b""), Ok(BTreeSet::new()));
    }

    #[test]
    fn initializers_stored_externally_are_listed_once() {
        let model = model(&[
            ("w1", Some("weights.bin")),
            ("b", None),
            ("w2", Some("weights.bin")),
            ("w3", Some("more/w3.bin")),
        ]);
        assert_eq!(external_data_locations(&model), Ok(set(&["more/w3.bin", "weights.bin"])));
    }

    #[test]
    fn a_location_without_the_external_flag_is_ignored() {
        let mut entry = bytes_field(1, b"location");
        entry.extend(bytes_field(2, b"stale.bin"));
        let tensor = [bytes_field(8, b"w"), bytes_field(13, &entry)].concat();
        let model = bytes_field(7, &bytes_field(5, &tensor));
        assert_eq!(external_data_locations(&model), Ok(BTreeSet::new()));
    }

    #[test]
    fn tensors_in_attributes_and_subgraphs_are_found() {
        // A Constant node's tensor attribute, and an If node whose then-branch has an initializer.
        let constant = bytes_field(5, &bytes_field(5, &tensor("c", Some("constant.bin"))));
        let branch = bytes_field(5, &tensor("t", Some("branch.bin")));
        let if_node = bytes_field(5, &bytes_field(6, &branch));
        let sparse = bytes_field(15, &bytes_field(1, &tensor("s", Some("sparse.bin"))));
        let graph = [bytes_field(1, &constant), bytes_field(1, &if_node), sparse].concat();
        let function = bytes_field(7, &bytes_field(5, &bytes_field(5, &tensor("f", Some("function.bin")))));
        let model = [bytes_field(7, &graph), bytes_field(25, &function)].concat();
        assert_eq!(
            external_data_locations(&model),
            Ok(set(&["branch.bin", "constant.bin", "function.bin", "sparse.bin"]))
        );
    }

    #[test]
    fn malformed_and_hostile_input_fails_cleanly() {
        let model = model(&[("w", Some("weights.bin"))]);
        for cut in 1..model.len() {
            // Any truncation is either still a valid prefix of fields or a clean error.
            let _ = external_data_locations(&model[..cut]);
        }
        assert!(external_data_locations(&model[..model.len() - 3]).is_err());
        assert_eq!(external_data_locations(&[0x0b]), Err(OnnxError::Malformed(WireError::WireType)));
        assert!(
            external_data_locations(&[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).is_err()
        );

        // Graphs nested in If attributes far deeper than any real model.
        let mut graph = Vec::new();
        for _ in 0..200 {
            let node = bytes_field(5, &bytes_field(6, &graph));
            graph = bytes_field(1, &node);
        }
        assert_eq!(external_data_locations(&bytes_field(7, &graph)), Err(OnnxError::Malformed(WireError::TooDeep)));
    }

    #[test]
    fn the_bundled_model_keeps_its_weights_inside() {
        let bytes =
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/models/ssd_mobilenet_v2_coco_prenms_fp32.onnx"))
                .expect("bundled model");
        assert_eq!(external_data_locations(&bytes), Ok(BTreeSet::new()));
    }
}
