//! The tool-call pipeline: exposure, input validation, secrets, confirmation, transports, results.
