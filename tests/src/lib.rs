//! Shared helpers for Kiln's end-to-end tests.
