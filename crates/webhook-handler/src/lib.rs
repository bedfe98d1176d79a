//! Deckhouse's `webhook-handler` (`d8 webhook-handler`).
pub mod answer;
pub mod cel;
pub mod render;
