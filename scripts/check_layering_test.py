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
        root = self.tree({"placement/fit.cc": '#include "scheduler/extender/extender.h"\n'})
        self.assertEqual(check_layering.check(root), [
            "placement/fit.cc:1: includes scheduler/extender/extender.h: "
            "placement/ may include only common, model"])

    def test_the_model_includes_nothing_of_ours(self):
        root = self.tree({"model/model.h": '#include <string>\n#include "common/status.h"\n'})
        self.assertEqual(check_layering.check(root), [
            "model/model.h:2: includes common/status.h: model/ may include only nothing"])

    def test_wire_types_and_the_engine_stay_apart(self):
        root = self.tree({"api/gpunode.h": '#include "placement/placement.h"\n',
                          "placement/ledger.cc": '#include "api/allocation.h"\n'})
        self.assertEqual(sorted(check_layering.check(root)), [
            "api/gpunode.h:1: includes placement/placement.h: api/ may include only common, model",
            "placement/ledger.cc:1: includes api/allocation.h: placement/ may include only common, model"])

    def test_cmd_and_test_code_are_off_limits(self):
        root = self.tree({"sim/replay.cc": '#include "cmd/sim/flags.h"\n',
                          "webhook/routes.cc": '#include "server/testing/certs.h"\n'})
        self.assertEqual(sorted(check_layering.check(root)), [
            "sim/replay.cc:1: includes cmd/sim/flags.h: nothing outside cmd/ may include cmd/",
            "webhook/routes.cc:1: includes server/testing/certs.h: production code includes test code"])

    def test_tests_may_use_test_helpers(self):
        root = self.tree({"kube/informer_test.cc": '#include "testing/test_apiserver.h"\n'})
        self.assertEqual(check_layering.check(root), [])

    def test_known_debt_is_allowed_until_it_is_gone(self):
        debt = {("api/gpunode.h", "placement/placement.h")}
        root = self.tree({"api/gpunode.h": '#include "placement/placement.h"\n'})
        self.assertEqual(check_layering.check(root, debt), [])
        with open(os.path.join(root, "api/gpunode.h"), "w") as f:
            f.write("")
        self.assertEqual(check_layering.check(root, debt), [
            "KNOWN_DEBT lists api/gpunode.h -> placement/placement.h, which is gone: remove the entry"])


if __name__ == "__main__":
    unittest.main()
