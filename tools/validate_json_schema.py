#!/usr/bin/env python3
"""Validates JSON files against a JSON Schema (draft 2020-12) with the
independent `jsonschema` package: `validate_json_schema.py SCHEMA FILE...`.
Exits non-zero and prints every violation when a file does not conform."""
import json
import sys

import jsonschema


def main() -> int:
    if len(sys.argv) < 3:
        print("usage: validate_json_schema.py SCHEMA FILE...", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    failed = False
    for path in sys.argv[2:]:
        with open(path) as f:
            doc = json.load(f)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        for e in errors:
            where = "/".join(str(p) for p in e.absolute_path) or "(root)"
            print(f"{path}: {where}: {e.message}")
            failed = True
        if not errors:
            print(f"{path}: valid")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
