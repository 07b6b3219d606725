"""Independent reference for Loom's sparse optimizers (tests/recsys/sparse_optimizer_test.cpp).

Reads the JSON the test wrote (initial tables, each step's touched rows and gradient values,
the learning rates, Loom's final tables and state), replays the steps with PyTorch:
  lazy_adam        torch.optim.SparseAdam, one instance per table, fed sparse COO gradients
  rowwise_adagrad  the row-wise Adagrad rule of DLRM/FBGEMM written with dense tensors:
                   G[r] += mean(g_r ** 2); w[r] -= lr * g_r / (sqrt(G[r]) + eps), touched rows only
and compares every table and state tensor. Exit 0 when all agree.
"""
import json
import sys

import torch


def tensor(j):
    return torch.tensor(j["data"], dtype=torch.float64).reshape(j["shape"])


def main(path):
    rec = json.load(open(path))
    opts = rec.get("options", {})
    tables = [tensor(t).float() for t in rec["initial"]]
    state = {}
    if rec["optimizer"] == "lazy_adam":
        params = [torch.nn.Parameter(t.clone()) for t in tables]
        optims = [torch.optim.SparseAdam([p], lr=1.0, betas=(opts["beta1"], opts["beta2"]), eps=opts["eps"])
                  for p in params]
        for step in rec["steps"]:
            for g in step["grads"]:
                t = g["table"]
                rows = tensor(g["rows"]).long()
                values = tensor(g["values"]).float()
                params[t].grad = torch.sparse_coo_tensor(rows.unsqueeze(0), values, params[t].shape)
                for group in optims[t].param_groups:
                    group["lr"] = step["lr"]
                optims[t].step()
                params[t].grad = None
        result = [p.detach() for p in params]
        for t, o in enumerate(optims):
            st = o.state[params[t]]
            state["exp_avg.%d" % t] = st["exp_avg"]
            state["exp_avg_sq.%d" % t] = st["exp_avg_sq"]
            state["step.%d" % t] = torch.tensor(float(st["step"]))
    elif rec["optimizer"] == "rowwise_adagrad":
        eps = opts["eps"]
        result = [t.clone() for t in tables]
        sums = [torch.full((t.shape[0],), opts["initial_accumulator"], dtype=torch.float32) for t in tables]
        for step in rec["steps"]:
            for g in step["grads"]:
                t = g["table"]
                rows = tensor(g["rows"]).long()
                grad = torch.zeros_like(result[t])
                grad[rows] = tensor(g["values"]).float()
                touched = torch.zeros(result[t].shape[0], dtype=torch.bool)
                touched[rows] = True
                sums[t] = torch.where(touched, sums[t] + grad.pow(2).mean(1), sums[t])
                update = step["lr"] * grad / (sums[t].sqrt() + eps).unsqueeze(1)
                result[t] = torch.where(touched.unsqueeze(1), result[t] - update, result[t])
        for t, s in enumerate(sums):
            state["sum.%d" % t] = s
    else:
        print("unknown optimizer", rec["optimizer"])
        return 1
    ok = True
    for t, (mine, ref) in enumerate(zip(rec["final"], result)):
        err = (tensor(mine) - ref.double()).abs().max().item()
        print("table %d: max |loom - reference| = %.3g" % (t, err))
        ok &= err <= 1e-6
    for name, ref in state.items():
        if name not in rec["state"]:
            print("state %s missing from Loom's" % name)
            ok = False
            continue
        err = (tensor(rec["state"][name]) - ref.double()).abs().max().item()
        print("state %s: max |loom - reference| = %.3g" % (name, err))
        ok &= err <= 1e-6
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
