from kveval.cli.cli import main

main()
