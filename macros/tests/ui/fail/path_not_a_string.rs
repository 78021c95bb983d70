kiln_macros::include_model!(tests::fixtures::tiny);

kiln_macros::include_model!();

fn main() {}
