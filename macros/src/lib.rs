//! Placeholder for `include_model!` (issue 3): the macro will be a thin shell over
//! `kiln_compiler::compile`, like every other front door.
