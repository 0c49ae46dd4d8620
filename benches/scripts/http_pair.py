"""Old and new builds of the `http` bench's socket-driven client, paired against one server.

    python3 benches/scripts/http_pair.py OLD_HTTP_BINARY NEW_HTTP_BINARY [REPEATS]

Each cell runs the old client, then the new one (the order swapped every repeat); the table gives
medians of the client's CPU time and p99, and their ratio.
"""
import subprocess, json, sys, statistics
bins={"old": sys.argv[1], "new": sys.argv[2]}
reps=int(sys.argv[3]) if len(sys.argv)>3 else 5
srv=subprocess.Popen([bins["new"],"--server"],stdin=subprocess.PIPE,stdout=subprocess.PIPE,text=True)
port=srv.stdout.readline().strip()
cells=[(1000,1000,100),(5000,1000,100),(2000,0,65536)]
res={}
for r in range(reps):
    for cell in cells:
        order=["old","new"] if r%2==0 else ["new","old"]
        for who in order:
            out=subprocess.run([bins[who],"--client","sockets",*map(str,cell),port],capture_output=True,text=True)
            try: run=json.loads(out.stdout.strip().splitlines()[-1])
            except Exception: print("fail",who,cell,out.stderr[-300:]); continue
            res.setdefault((cell,who),[]).append(run)
srv.stdin.close(); srv.wait()
print("cell | old cpu ms | new cpu ms | new/old | old p99 | new p99 | errors old/new | runs old/new")
for cell in cells:
    o=res.get((cell,"old"),[]); n=res.get((cell,"new"),[])
    med=lambda l,k: statistics.median([x[k] for x in l]) if l else float('nan')
    print(cell, "|", round(med(o,"cpu_ms"),1), "|", round(med(n,"cpu_ms"),1), "|", round(med(n,"cpu_ms")/med(o,"cpu_ms"),3), "|", round(med(o,"p99_ms"),1), "|", round(med(n,"p99_ms"),1), "|", sum(x["errors"] for x in o), "/", sum(x["errors"] for x in n), "|", med(o,"runs"), "/", med(n,"runs"))
    print("   old cpu all:", [round(x["cpu_ms"]) for x in o], " new:", [round(x["cpu_ms"]) for x in n])
