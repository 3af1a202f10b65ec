#!/usr/bin/env bash
# Near miss for 02-dynmoe on pithtrain, which must FAIL: the straight-through gradient is the identity on s_e - sigmoid(g_e), skipping the relu's derivative.
# Why: instruction: a_e = sign(relu(s_e - sigmoid(g_e))) with the derivative of relu(s_e - sigmoid(g_e)) used for the sign; passing the gradient through unconditionally also sends it to inactive experts (margin < 0), whose relu derivative is 0.
set -euo pipefail
python3 "$GOLD_DIR/../../../break_gold.py" "$GOLD_DIR/../../gold/pithtrain/dynmoe.patch" \
  'margin_TE = F.relu(score_TE - torch.sigmoid(thresholds_E))' \
  'margin_TE = score_TE - torch.sigmoid(thresholds_E)'
python3 - <<'PY'
from pathlib import Path
p = Path('pithtrain/models/deepseek_v2.py')
t = p.read_text()
assert t.count('        return torch.sign(x)\n') == 1
p.write_text(t.replace('        return torch.sign(x)\n', '        return torch.sign(F.relu(x))\n'))
PY
