from harness.judge.main import main

main()
