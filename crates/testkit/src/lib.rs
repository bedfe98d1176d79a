//! Real parts for tests.
