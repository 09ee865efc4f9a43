//! The protobuf wire format, as far as reading ONNX files needs it: fields of one message, read
//! in place without copying. The one reader of it: `crate::onnx` (a model's interface) and
//! `crate::backend`'s walks of an ONNX file (external data, quantize nodes, the framing rten
//! reads) all use it.
//!
//! Owns: splitting a message's bytes into (field number, value) pairs and decoding the few scalar
//! encodings ONNX uses (varints, little-endian fixed 32/64-bit). Must not: know ONNX's messages
//! (that is the caller's business) or trust its input: every length is checked against the bytes
//! that remain, so a hostile file ends in an error, never a panic or an allocation.

/// Nesting limit for a walk down nested messages (graphs inside attributes inside nodes inside
/// graphs …): real models nest a few levels; a hostile file must not exhaust the stack.
pub const MAX_DEPTH: usize = 64;

/// Why bytes are not a protobuf message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("truncated varint")]
    TruncatedVarint,
    #[error("varint longer than 10 bytes")]
    LongVarint,
    #[error("a field runs past the end")]
    PastTheEnd,
    #[error("unsupported wire type (groups are not used by ONNX)")]
    WireType,
    /// A walk went deeper than [`MAX_DEPTH`] (reported by the walks, which know the nesting).
    #[error("messages nested more than {MAX_DEPTH} levels deep")]
    TooDeep,
}

/// One field of a message: its number and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field<'a> {
    Varint(u64, u64),
    /// A length-delimited value: a nested message, a string, bytes or a packed array.
    Bytes(u64, &'a [u8]),
    Fixed32(u64, [u8; 4]),
    Fixed64(u64, [u8; 8]),
}

/// The fields of one message, in the order they are written.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    pub fn new(message: &'a [u8]) -> Fields<'a> {
        Fields { rest: message }
    }

    /// Reads one varint from the front of the remaining bytes.
    pub fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.rest.split_first().ok_or(WireError::TruncatedVarint)?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError::LongVarint)
    }

    fn take(&mut self, length: u64) -> Result<&'a [u8], WireError> {
        let length = usize::try_from(length).map_err(|_| WireError::PastTheEnd)?;
        if length > self.rest.len() {
            return Err(WireError::PastTheEnd);
        }
        let (bytes, rest) = self.rest.split_at(length);
        self.rest = rest;
        Ok(bytes)
    }

    fn field(&mut self) -> Result<Field<'a>, WireError> {
        let key = self.varint()?;
        let number = key >> 3;
        match key & 7 {
            0 => Ok(Field::Varint(number, self.varint()?)),
            1 => {
                let bytes = self.take(8)?;
                Ok(Field::Fixed64(number, bytes.try_into().map_err(|_| WireError::PastTheEnd)?))
            }
            2 => {
                let length = self.varint()?;
                Ok(Field::Bytes(number, self.take(length)?))
            }
            5 => {
                let bytes = self.take(4)?;
                Ok(Field::Fixed32(number, bytes.try_into().map_err(|_| WireError::PastTheEnd)?))
            }
            _ => Err(WireError::WireType),
        }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, WireError>;

    /// The next field; after an error, `None` (the rest cannot be split any more).
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

/// Packed varints (a `repeated int64` field written packed), or an error.
pub fn packed_varints(bytes: &[u8]) -> impl Iterator<Item = Result<u64, WireError>> + '_ {
    let mut reader = Fields::new(bytes);
    std::iter::from_fn(move || (!reader.rest.is_empty()).then(|| reader.varint()))
}

/// Writes protobuf messages for tests of the ONNX readers.
#[cfg(test)]
pub(crate) mod encode {
    pub fn varint(mut value: u64, out: &mut Vec<u8>) {
        while value >= 0x80 {
            out.push((value as u8) | 0x80);
            value >>= 7;
        }
        out.push(value as u8);
    }

    pub fn bytes_field(number: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        varint(number << 3 | 2, &mut out);
        varint(bytes.len() as u64, &mut out);
        out.extend_from_slice(bytes);
        out
    }

    pub fn varint_field(number: u64, value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        varint(number << 3, &mut out);
        varint(value, &mut out);
        out
    }

    pub fn fixed32_field(number: u64, value: [u8; 4]) -> Vec<u8> {
        let mut out = Vec::new();
        varint(number << 3 | 5, &mut out);
        out.extend_from_slice(&value);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::encode::*;
    use super::*;

    #[test]
    fn fields_of_every_wire_type_are_read_in_order() {
        let mut message = varint_field(1, 300);
        message.extend(bytes_field(2, b"name"));
        message.extend(fixed32_field(3, 1.5f32.to_le_bytes()));
        message.extend([4 << 3 | 1, 1, 2, 3, 4, 5, 6, 7, 8]);
        let fields = Fields::new(&message).collect::<Result<Vec<_>, _>>().expect("fields");
        assert_eq!(
            fields,
            [
                Field::Varint(1, 300),
                Field::Bytes(2, b"name"),
                Field::Fixed32(3, 1.5f32.to_le_bytes()),
                Field::Fixed64(4, [1, 2, 3, 4, 5, 6, 7, 8])
            ]
        );
    }

    #[test]
    fn hostile_bytes_end_in_one_error() {
        for bytes in [
            &[0x0b][..],
            &[0x12, 0x05, 1],
            &[0x08, 0xff],
            &[0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ] {
            let results = Fields::new(bytes).collect::<Vec<_>>();
            assert_eq!(results.len(), 1, "{bytes:?}");
            assert!(results[0].is_err(), "{bytes:?}");
        }
        assert_eq!(Fields::new(&[0xff; 64]).count(), 1, "all 0xff is one error, not a loop");
    }

    #[test]
    fn packed_varints_are_split() {
        let mut packed = Vec::new();
        for value in [1u64, 300, 640] {
            varint(value, &mut packed);
        }
        assert_eq!(packed_varints(&packed).collect::<Result<Vec<_>, _>>(), Ok(vec![1, 300, 640]));
        assert!(packed_varints(&[0x80]).any(|value| value.is_err()));
    }
}
