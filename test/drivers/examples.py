"""Runs the ```python blocks of a Markdown page (docs/drivers-errors.md) with
/usr/bin/python3, each as a script, and checks what it prints: every
print(...) call followed on its line by a comment "# text" must print a
line starting with that text, in order.  Prints "test drivers_docs_example
... ok|FAILED"."""

import re
import subprocess
import sys

BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PRINTED = re.compile(r"^\s*print\(.*\)\s*#\s*(.+?)\s*$", re.M)


def main():
    text = open(sys.argv[1]).read()
    failures = []
    blocks = BLOCK.findall(text)
    if not blocks:
        failures.append("no python block")
    for number, code in enumerate(blocks, 1):
        result = subprocess.run(["/usr/bin/python3", "-"], input=code, capture_output=True,
                                text=True, timeout=120)
        sys.stdout.write(result.stdout)
        if result.returncode != 0:
            failures.append(f"block {number} exited {result.returncode}:\n{result.stderr}")
            continue
        lines, wanted = result.stdout.splitlines(), PRINTED.findall(code)
        if len(lines) != len(wanted) or not all(l.startswith(w) for l, w in zip(lines, wanted)):
            failures.append(f"block {number} printed {lines}, want lines starting {wanted}")
    for failure in failures:
        print("FAILED:", failure)
    print(f"test drivers_docs_example ... {'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
