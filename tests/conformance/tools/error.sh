#!/bin/sh
# test_error_handling: always fails, saying so in an error envelope.
echo '{"outcome":"error","message":"This tool intentionally returns an error for testing"}'
