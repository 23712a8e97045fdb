#!/bin/sh
# test_simple_text: prints one JSON string.
echo '"This is a simple text response for testing."'
