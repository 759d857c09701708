import json,sys,glob,os,collections
# usage: netsum.py DIR : prints weft/NCCL µs per variant, collective, size (out of place)
rows=collections.defaultdict(dict)
for f in sorted(glob.glob(os.path.join(sys.argv[1],'*.json'))):
    name=os.path.basename(f)[:-5]
    try: d=json.load(open(f))
    except Exception as e: print(name,'unreadable',e); continue
    v,c=name.split('-',2)[0]+'-'+name.split('-',2)[1] if name.count('-')>=2 else name, name.rsplit('-',1)[-1]
    for r in d.get('results',[]):
        o=r['out_of_place']; b=r.get('baseline',{}).get('out_of_place',{})
        print(f"{name:28s} {r['size']:>6} weft {o['time']:8.1f} nccl {b.get('time',0):8.1f} ratio {b.get('time',0)/o['time']:.2f} wrong {o['nwrong']}")
