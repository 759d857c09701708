#!/usr/bin/env python3
"""NCCL time / weft time per collective and size from examples/cbench logs.

usage: scripts/cbench-ratios.py BASELINE.log RUN.log [RUN.log ...]

BASELINE is a cbench log of the reference library (NCCL); each RUN a log of
the same sweep through another (libweft_nccl.so, or an older build). Prints
one table per RUN: baseline out-of-place time divided by the run's (> 1:
the run is faster), by collective and message size.
"""
import sys,re,os
def parse(f):
    d={};c=None
    for l in open(f):
        m=re.match(r'# (\w+)$',l.strip())
        if m and m.group(1)!='cbench': c=m.group(1); continue
        p=l.split()
        if c and len(p)>=9 and p[0].isdigit():
            try: d[(c,int(p[0]))]=float(p[5])
            except: pass
    return d
base=parse(sys.argv[1])
def h(s):
    for u,k in (('G',1<<30),('M',1<<20),('K',1<<10)):
        if s>=k: return f"{s//k}{u}"
    return str(s)
sizes=sorted({s for _,s in base}); colls=[]
for c,_ in base:
    if c not in colls: colls.append(c)
for f in sys.argv[2:]:
    d=parse(f); print("==",os.path.basename(f), "(NCCL time / this)")
    print('coll'.ljust(12)+' '.join(h(s).rjust(6) for s in sizes))
    for c in colls:
        print(c.ljust(12)+' '.join((f"{base[(c,s)]/d[(c,s)]:.3f}" if (c,s) in d else '-').rjust(6) for s in sizes))
