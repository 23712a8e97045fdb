#!/bin/sh
# json_schema_2020_12_tool: answers an empty object.
echo '{}'
