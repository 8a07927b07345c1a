import sys, statistics as st
# names of the arms, in the order of the columns: summary.py FILE NAME...
names=sys.argv[2:] or ["base256","d8","d8_nopf","d8_nopf_store","256_nopf"]
rows=[l.split() for l in open(sys.argv[1])]
for reg,lo,hi in (("fast",0,70),("slow",150,1e9)):
    R=[r for r in rows if len(r)==8 and lo<=float(r[1])<hi and lo<=float(r[2])<hi]
    # also require all arms in same regime
    R=[r for r in R if all((float(x)<0.15)==(reg=="fast") for x in r[3:])]
    if not R: continue
    fl=[ (float(r[1])+float(r[2]))/2 for r in R]
    print(reg, len(R), "rounds; floor median %.1f ns"%st.median(fl))
    for i,n in enumerate(names):
        v=[float(r[3+i]) for r in R]
        rat=[float(r[3+i])/float(r[3]) for r in R]
        ovf=[float(r[3+i])*1000/f for r,f in zip(R,fl)]
        low=sum(1 for x in rat if x<1)
        print("  %-14s median %.4f  range %.4f-%.4f  /base %.3f (lower in %d)  /floor %.2f"%(n,st.median(v),min(v),max(v),st.median(rat),low,st.median(ovf)))
