#!/bin/sh
# test_tool_with_progress: works for 0.1 s, then answers.
sleep 0.1
echo '{"done":true}'
