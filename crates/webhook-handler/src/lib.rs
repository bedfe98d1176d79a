//! Deckhouse's `webhook-handler` (`d8 webhook-handler`).
pub mod cel;
pub mod render;
