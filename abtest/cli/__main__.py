from abtest.cli.main import main

main()
