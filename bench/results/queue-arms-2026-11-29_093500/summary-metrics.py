import sys, statistics as st
f=sys.argv[1]; names=sys.argv[2:]
rows=[l.split() for l in open(f)]
by={}
for r in rows:
    if len(r)!=3+len(names): continue
    try: vals=[float(x) for x in r[3:]]
    except: continue
    by.setdefault(r[2],[]).append((float(r[1]),vals))
for m,v in by.items():
    for reg,lo,hi in (("fast",0,70),("slow",150,1e9)):
        w=[x for x in v if lo<=x[0]<hi]
        if not w: continue
        out=[]
        for i,n in enumerate(names):
            rat=[x[1][i]/x[1][0] for x in w]
            out.append("%s %.4g (%.3f, %d lower)"%(n,st.median(x[1][i] for x in w),st.median(rat),sum(1 for q in rat if q<1)))
        print(m,reg,len(w)," | ".join(out))
