//! What an ONNX file says about itself, as values: its inputs and outputs (names, element types,
//! dimensions, producers), the scaling its graph applies to the first input, its producer and the
//! bytes of its weights.
//!
//! Owns: [`ModelInterface`] and the types it is made of. Must not: read files or bytes
//! (`super::read` does).

/// The element type of a tensor (`TensorProto.DataType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementType {
    Float,
    Float16,
    Uint8,
    Int8,
    Int32,
    Int64,
    Bool,
    /// Any other `DataType` number.
    Other(u64),
}

impl ElementType {
    pub(super) fn from_onnx(number: u64) -> ElementType {
        match number {
            1 => ElementType::Float,
            2 => ElementType::Uint8,
            3 => ElementType::Int8,
            6 => ElementType::Int32,
            7 => ElementType::Int64,
            9 => ElementType::Bool,
            10 => ElementType::Float16,
            other => ElementType::Other(other),
        }
    }
}

impl std::fmt::Display for ElementType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ElementType::Float => f.write_str("float32"),
            ElementType::Float16 => f.write_str("float16"),
            ElementType::Uint8 => f.write_str("uint8"),
            ElementType::Int8 => f.write_str("int8"),
            ElementType::Int32 => f.write_str("int32"),
            ElementType::Int64 => f.write_str("int64"),
            ElementType::Bool => f.write_str("bool"),
            ElementType::Other(number) => write!(f, "data type {number}"),
        }
    }
}

/// One dimension of a declared shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Fixed(u64),
    /// A named (`batch`, `N`) or unknown dimension.
    Symbolic,
}

/// A graph input or output as the file declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub element: ElementType,
    /// `None`: the file declares no shape.
    pub dims: Option<Vec<Dim>>,
    /// The operator that produces it (outputs only; `None` for inputs and unknown producers).
    pub producer: Option<String>,
}

impl TensorInfo {
    /// The fixed dimensions, or `None` when any is symbolic or the shape is unknown.
    pub fn fixed_dims(&self) -> Option<Vec<u64>> {
        self.dims.as_ref()?.iter().map(|dim| if let Dim::Fixed(value) = dim { Some(*value) } else { None }).collect()
    }
}

impl std::fmt::Display for TensorInfo {
    /// "`output0` float32 [1, 300, 6]", symbolic dimensions as `?`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` {}", self.name, self.element)?;
        match &self.dims {
            None => f.write_str(" (no shape)"),
            Some(dims) => {
                let dims = dims
                    .iter()
                    .map(|dim| match dim {
                        Dim::Fixed(value) => value.to_string(),
                        Dim::Symbolic => "?".to_string(),
                    })
                    .collect::<Vec<_>>();
                write!(f, " [{}]", dims.join(", "))
            }
        }
    }
}

/// The element-wise affine map `value * scale[c] + offset[c]` that the graph applies to its first
/// input before any other operator (identity when it applies none).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InputScaling {
    pub scale: [f32; 3],
    pub offset: [f32; 3],
}

impl InputScaling {
    pub const IDENTITY: InputScaling = InputScaling { scale: [1.0; 3], offset: [0.0; 3] };
}

/// The interface of an ONNX model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInterface {
    /// Graph inputs that are not initializers, in order.
    pub inputs: Vec<TensorInfo>,
    pub outputs: Vec<TensorInfo>,
    /// What the graph does to its first input before anything else.
    pub input_scaling: InputScaling,
    /// `ModelProto.producer_name`, e.g. `pytorch`.
    pub producer: String,
    /// Bytes of the graph's initializers (its weights): their messages in the file, plus the
    /// `length` of those stored in another file (`external_data`). Weights a graph keeps in
    /// `Constant` nodes are not counted.
    pub weight_bytes: u64,
}

impl ModelInterface {
    /// The outputs' names and shapes, e.g. "`boxes` float32 [1, 1917, 4], `scores` float32 [1, 1917, 91]".
    pub fn describe_outputs(&self) -> String {
        if self.outputs.is_empty() {
            return "no outputs".to_string();
        }
        self.outputs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    }
}
