//! The `jetson-detectd` command line.
fn main() {}
