import json,sys
sys.path.insert(0,'tests')
from expect import mismatches
for path in sys.argv[1:]:
    try:
        d=json.load(open(path))
    except Exception as e:
        print(path, e); continue
    res=d['results']
    print(path, len(res), 'tasks')
    for r in res:
        t=r.get('timing') or {}
        print(' ', r['solution_path'].split('/')[-1][:28], r['problem'].split('/')[-1][:14], r['status'], ','.join(r['flags']), t.get('clock'), r.get('speedup') and round(r['speedup'],2), t.get('ref_outside_ms'), t.get('sol_outside_ms'), r.get('custom_share'), (r.get('overhead_seconds')), '|', r['message'][:160])
    mm=mismatches(res)
    print('MISMATCHES', len(mm))
    for m in mm: print('  ', m[:400])
