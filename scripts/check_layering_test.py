#!/usr/bin/env python3
"""The layering check fails on each kind of breach (so the `layering` test can fail)."""
import os
import tempfile
import unittest

import check_layering


class CheckLayeringTest(unittest.TestCase):
    def tree(self, files):
        root = tempfile.mkdtemp(prefix="gpupack-layering-")
        debt = dict.fromkeys(check_layering.KNOWN_DEBT)
        for path, _ in debt:  # the real tree's debt, present so only the case's own breach shows
            files.setdefault(path, "")
        for (path, header) in debt:
            files[path] += f'#include "{header}"\n'
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        return root

    def test_a_clean_tree_passes(self):
        root = self.tree({"agent/agent.cc": '#include "api/gpunode.h"\n#include "kube/client.h"\n'})
        self.assertEqual(check_layering.check(root), [])

    def test_an_upward_include_is_named(self):
        root = self.tree({"scheduler/core/fit.cc": '#include "scheduler/extender/extender.h"\n'})
        self.assertEqual(check_layering.check(root), [
            "scheduler/core/fit.cc:1: includes scheduler/extender/extender.h: "
            "scheduler/core/ may include only common"])

    def test_cmd_and_test_code_are_off_limits(self):
        root = self.tree({"sim/replay.cc": '#include "cmd/sim/flags.h"\n',
                          "webhook/routes.cc": '#include "server/testing/certs.h"\n'})
        self.assertEqual(sorted(check_layering.check(root)), [
            "sim/replay.cc:1: includes cmd/sim/flags.h: nothing outside cmd/ may include cmd/",
            "webhook/routes.cc:1: includes server/testing/certs.h: production code includes test code"])

    def test_tests_may_use_test_helpers(self):
        root = self.tree({"kube/informer_test.cc": '#include "e2e/test_apiserver.h"\n'})
        self.assertEqual(check_layering.check(root), [])

    def test_removed_debt_must_leave_the_list(self):
        root = self.tree({})
        path, header = sorted(check_layering.KNOWN_DEBT)[0]
        with open(os.path.join(root, path), "w") as f:
            f.write("")
        self.assertEqual(check_layering.check(root), [
            f"KNOWN_DEBT lists {path} -> {header}, which is gone: remove the entry"])


if __name__ == "__main__":
    unittest.main()
