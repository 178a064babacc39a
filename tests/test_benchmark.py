"""benchmarks/paper_table.py end to end on a tiny budget: one model, the three
modes in one process, the ablation's two processes (one inter-op thread,
then the default), and every output written.  Numbers are not checked here
(speed and graph counts are measured in the benchmark, not in tests); that
they exist is."""
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')


def test_paper_table_runs_end_to_end_and_writes_its_outputs(tmp_path):
    subprocess.run([sys.executable, os.path.join(ROOT, 'benchmarks', 'paper_table.py'),
                    '--models', 'a3c', '--steps', '5', '--warmup', '4', '--out', str(tmp_path)],
                   check=True, capture_output=True, text=True,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
    table = (tmp_path / 'paper_table.md').read_text()
    assert '| A3C | DRL | frames/s |' in table and '+PARL' in table
    assert 'Training loops as users write them' in table and '| A3C | 9 |' in table
    data = json.loads((tmp_path / 'paper_table.json').read_text())
    row, = data['table']
    assert row['janus'] > 0 and row['graphs_built'] >= 0 and row['janus_calls'] > 0
    for mode in ('eager', 'janus', 'symbolic'):
        assert row[mode + '_steps'] > 0
    assert row['loss_diff_janus'] < 1e-4   # janus computes eager's losses
    assert set(data['ablation']['a3c']) == {'IMP', 'BASE', '+UNRL', '+SPCN', 'IMP*', '+PARL'}
    assert (tmp_path / 'paper_table.csv').exists()
