//! Parameters of the typed kernels. Every type here derives `serde::Serialize`: the
//! compiler emits a value as `kiln_runtime::typed::params::Name { .. }`, so each type
//! name is unique in this module (types defined beside their kernel are re-exported).
