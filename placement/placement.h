// The placement core: does a pod fit on a node, how good is the node, and which devices does
// the pod get. Pure: values in, values out.
//
// Usage: build a Policy once per (policy, typical workload); for each node keep a NodeSummary
// (Summarize) next to the node and recompute it whenever the node's devices or shares change or
// the policy is replaced; call Score per (node, pod) on hot paths (filter, prioritize, the
// simulator's scan of every node: no allocation), and Evaluate on the chosen node to get the
// Placement. Both compute the same verdict and cost, and Evaluate's placement is exactly the
// device choice that produced that cost, so the bind agrees with the score.
//
// This header gathers the placement library's public parts: node_summary.h (free memory and the
// node summary), policy.h (Policy, its rebuild and the ranking keys) and ledger.h (applying and
// removing placements). Headers that open with "Internal to placement/" (demand.h, fgd_cost.h,
// device_pick.h) are the engine's own.
#pragma once

#include "placement/ledger.h"
#include "placement/node_summary.h"
#include "placement/policy.h"
