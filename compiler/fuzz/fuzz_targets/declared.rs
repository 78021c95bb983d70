//! Shared by the fuzz targets that choose input shapes (`#[path]`-included).

use onnx_protobuf::ValueInfoProto;

/// The rank a graph input declares, if it declares a tensor shape.
pub fn declared_rank(vi: &ValueInfoProto) -> Option<usize> {
    vi.type_
        .as_ref()
        .filter(|t| t.has_tensor_type())
        .map(|t| t.tensor_type())
        .filter(|t| t.shape.is_some())
        .map(|t| t.shape.dim.len())
}
