#!/usr/bin/python3
"""Asks the questions of the set named by its argument (`user`: a username and
an email address; `defaults`: one question of each type, each with a
default) that the blob's answers do not hold yet, all in one round; once
they are answered, answers with them."""
import json
import sys

SETS = {
    "user": [
        {"id": "username", "text": "User's response", "schema": {"type": "string"}},
        {"id": "email", "text": "User's email address", "schema": {"type": "string", "format": "email"}},
    ],
    "defaults": [
        {"id": "name", "text": "User name", "schema": {"type": "string"}, "default": "John Doe"},
        {"id": "age", "text": "User age", "schema": {"type": "integer"}, "default": 30},
        {"id": "score", "text": "User score", "schema": {"type": "number"}, "default": 95.5},
        {
            "id": "status",
            "text": "User status",
            "schema": {"type": "string", "enum": ["active", "inactive", "pending"]},
            "default": "active",
        },
        {"id": "verified", "text": "Verification status", "schema": {"type": "boolean"}, "default": True},
    ],
}

with open(sys.argv[1]) as blob_file:
    answers = json.load(blob_file)["tool"]["answers"]
missing = [q for q in SETS[sys.argv[2]] if q["id"] not in answers]
if missing:
    print(json.dumps({"outcome": "needs_input", "questions": missing}))
else:
    print(json.dumps({"answers": answers}))
