//! The protobuf framing of an ONNX file, checked the way rten reads it, before rten reads it.
//!
//! rten 0.27's varint reader never returns on a varint of ten bytes that all carry the
//! continuation bit: it stops consuming and loops at 100 % CPU (an all-0xff file hangs the load,
//! and with it `run` and `check-config`). ONNX Runtime and TensorRT's parser refuse such files.
//! So before rten sees a file, every varint rten would read is read here first: the tags, varint
//! values and lengths of every field of every message rten descends into, and the packed varint
//! arrays it decodes (`int32_data`, `int64_data`), with the same message schema as rten's
//! `rten_onnx::onnx` (fields rten skips are skipped here, but their tags and lengths are read,
//! as rten reads them). Anything malformed is refused with the wire error.
//!
//! Owns: that schema and the walk. Must not: copy or decode tensor data, or recurse without bound.

use crate::protobuf::{packed_varints, Field, Fields, WireError, MAX_DEPTH};

/// The messages rten decodes (`rten_onnx::onnx`'s `DecodeMessage` types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Message {
    Model,
    OperatorSet,
    StringEntry,
    Graph,
    Node,
    Attribute,
    Tensor,
    ValueInfo,
    Type,
    TypeTensor,
    TypeSequence,
    Shape,
    Dimension,
}

impl Message {
    /// The message a length-delimited field of `self` holds, where rten decodes it as one.
    fn child(self, field: u64) -> Option<Message> {
        use Message::*;
        match (self, field) {
            (Model, 7) => Some(Graph),
            (Model, 8) => Some(OperatorSet),
            (Model, 14) | (Tensor, 13) => Some(StringEntry),
            (Graph, 1) => Some(Node),
            (Graph, 5) | (Attribute, 5) => Some(Tensor),
            (Graph, 11..=13) => Some(ValueInfo),
            (Node, 5) => Some(Attribute),
            (Attribute, 6) => Some(Graph),
            (ValueInfo, 2) | (TypeSequence, 1) => Some(Type),
            (Type, 1) => Some(TypeTensor),
            (Type, 4) => Some(TypeSequence),
            (TypeTensor, 2) => Some(Shape),
            (Shape, 1) => Some(Dimension),
            _ => None,
        }
    }

    /// Whether a length-delimited field of `self` is a packed array of varints rten decodes.
    fn packed_varints(self, field: u64) -> bool {
        matches!((self, field), (Message::Tensor, 5 | 7))
    }
}

/// Refuses `model` (the bytes of an ONNX file) when rten's reader could not read its framing.
pub fn check(model: &[u8]) -> Result<(), WireError> {
    walk(Message::Model, model, 0)
}

fn walk(message: Message, bytes: &[u8], depth: usize) -> Result<(), WireError> {
    if depth > MAX_DEPTH {
        return Err(WireError::TooDeep);
    }
    for field in Fields::new(bytes) {
        if let Field::Bytes(number, value) = field? {
            if let Some(child) = message.child(number) {
                walk(child, value, depth + 1)?;
            } else if message.packed_varints(number) {
                for value in packed_varints(value) {
                    value?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::encode::{bytes_field, varint_field};

    #[test]
    fn the_bundled_model_passes() {
        let model =
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/models/ssd_mobilenet_v2_coco_prenms_fp32.onnx"))
                .expect("the bundled model");
        check(&model).expect("a valid model");
    }

    #[test]
    fn a_varint_of_ten_continuation_bytes_is_refused_wherever_rten_would_read_it() {
        let endless = [0xffu8; 16];
        assert!(check(&endless).is_err(), "all 0xff");
        let mut in_a_shape = varint_field(1, 3);
        in_a_shape.extend_from_slice(&[0x08]);
        in_a_shape.extend_from_slice(&endless);
        let dim = bytes_field(1, &in_a_shape);
        let model = bytes_field(7, &bytes_field(11, &bytes_field(2, &bytes_field(1, &bytes_field(2, &dim)))));
        assert!(check(&model).is_err(), "a dimension deep inside the graph's inputs");
        let packed = bytes_field(7, &bytes_field(5, &bytes_field(7, &endless)));
        assert!(check(&packed).is_err(), "a packed int64_data array");
        let raw = bytes_field(7, &bytes_field(5, &bytes_field(9, &endless)));
        check(&raw).expect("raw_data is bytes rten does not parse");
    }

    #[test]
    fn nesting_is_bounded() {
        let mut graph = Vec::new();
        for _ in 0..100 {
            graph = bytes_field(1, &bytes_field(5, &bytes_field(6, &graph)));
        }
        assert!(matches!(check(&bytes_field(7, &graph)), Err(WireError::TooDeep)));
    }
}
