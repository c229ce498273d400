//! `sqlx::migrate!` embeds the migrations when this crate compiles, and Cargo does not know
//! the macro read that directory: without this, a new migration file alone would leave every
//! binary and test template on the old list.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
