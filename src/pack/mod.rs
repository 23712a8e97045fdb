//! Reproducible bundle archives: the writer, and a safe reader/extractor.
