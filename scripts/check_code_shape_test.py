#!/usr/bin/env python3
"""The code shape check fails on each kind of breach (so the `code_shape` test can fail)."""
import os
import tempfile
import unittest

import check_code_shape


def body(lines):
    """A function whose body spans `lines` lines, opening brace to closing brace."""
    return "int F(int a) {\n" + "  a += 1;\n" * (lines - 2) + "  return a; }\n"


class CheckCodeShapeTest(unittest.TestCase):
    def tree(self, files):
        root = tempfile.mkdtemp(prefix="gpupack-code-shape-")
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        return root

    def test_a_function_of_80_lines_passes_and_81_fails(self):
        root = self.tree({"placement/ok.cc": body(80), "placement/long.cc": "\n" + body(81)})
        self.assertEqual(check_code_shape.check(root, ["placement"], []), [
            "placement/long.cc:2: F is 81 lines; at most 80: split it into named steps"])

    def test_member_functions_in_namespaces_and_classes_count(self):
        text = ("namespace gpupack::placement {\nclass Policy {\n public:\n  int Score() const {\n"
                + "    x();\n" * 80 + "  }\n};\n}  // namespace\n")
        root = self.tree({"placement/policy.h": text})
        self.assertEqual(check_code_shape.check(root, ["placement"], []), [
            "placement/policy.h:4: Score is 82 lines; at most 80: split it into named steps"])

    def test_a_lambda_is_part_of_its_function(self):
        text = "void Outer() {\n  auto f = [](int x) {\n" + "    x++;\n" * 40 + "  };\n" + "  f(1);\n" * 40 + "}\n"
        root = self.tree({"placement/lambda.cc": text})
        self.assertEqual(check_code_shape.check(root, ["placement"], []), [
            "placement/lambda.cc:1: Outer is 84 lines; at most 80: split it into named steps"])

    def test_braces_in_comments_and_strings_do_not_count(self):
        text = ('void A() {\n  // }\n  const char* s = "}";\n  char c = \'}\';\n  /* } */\n'
                + "  x();\n" * 80 + "}\n")
        root = self.tree({"placement/tricky.cc": text})
        self.assertEqual(check_code_shape.check(root, ["placement"], []), [
            "placement/tricky.cc:1: A is 86 lines; at most 80: split it into named steps"])

    def test_tests_and_data_initializers_are_not_functions(self):
        table = "const int kTable[] = {\n" + "  1,\n" * 100 + "};\n"
        root = self.tree({"placement/fit_test.cc": body(200), "placement/table.cc": table})
        self.assertEqual(check_code_shape.check(root, ["placement"], []), [])

    def test_only_the_named_folders_are_checked_for_long_functions(self):
        root = self.tree({"sim/replay.cc": body(200)})
        self.assertEqual(check_code_shape.check(root, ["placement"], []), [])

    def test_a_long_file_must_say_why_near_its_top(self):
        long_text = "int x;\n" * 501
        reasoned = "// Long file: one table per device model.\n" + long_text
        late = "int y;\n" * 40 + "// Long file: too late to be read.\n" + long_text
        root = self.tree({"model/short.h": "int x;\n" * 500, "model/long.h": long_text,
                          "model/reasoned.h": reasoned, "model/late.cc": late,
                          "api/other.cc": long_text})
        self.assertEqual(check_code_shape.check(root, [], ["model"]), [
            "model/late.cc: 542 lines without a `// Long file:` comment line in its first 40 lines "
            "saying why it stays over 500",
            "model/long.h: 501 lines without a `// Long file:` comment line in its first 40 lines "
            "saying why it stays over 500"])


if __name__ == "__main__":
    unittest.main()
