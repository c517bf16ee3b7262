from groundrl.cli import main

main()
